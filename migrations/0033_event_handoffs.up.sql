SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- The relay's hand-off mark is kept per recording transaction, not per
-- event. Marking each outbox row (handed_off) was an update of every row
-- the relay enqueued, the ack path's second statement after the record;
-- now the record statement's transaction id goes with each outbox row
-- (record_xid, set by its default, no index) and the relay inserts one
-- row here per transaction once it has enqueued every event the
-- transaction recorded: a batch of hundreds of events is a few rows. A
-- task recovery finds missing for an event whose transaction is here was
-- lost by Redis; for any other event it is a routine hand-off
-- (jobs/relay.go, dedupe/outbox.go). Retention deletes a mark once no
-- outbox row can be of its transaction (older than the oldest row).
CREATE TABLE event_handoffs (
    record_xid    xid8        PRIMARY KEY,
    handed_off_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX event_handoffs_handed_off_at_idx ON event_handoffs (handed_off_at);

ALTER TABLE event_outbox ADD COLUMN record_xid xid8;
ALTER TABLE event_outbox ALTER COLUMN record_xid SET DEFAULT pg_current_xact_id();

-- Rows marked before this migration keep their mark under xid 1, which
-- no transaction has.
UPDATE event_outbox SET record_xid = '1' WHERE handed_off;
INSERT INTO event_handoffs (record_xid)
SELECT '1' WHERE EXISTS (SELECT 1 FROM event_outbox WHERE record_xid = '1');
ALTER TABLE event_outbox DROP COLUMN handed_off;

-- No row is updated any more: pages can be full again (0032).
ALTER TABLE event_outbox RESET (fillfactor);
