SET lock_timeout = '10s';
SET statement_timeout = '5min';

ALTER TABLE event_outbox ADD COLUMN handed_off boolean NOT NULL DEFAULT false;
UPDATE event_outbox o SET handed_off = true
WHERE EXISTS (SELECT 1 FROM event_handoffs h WHERE h.record_xid = o.record_xid);
ALTER TABLE event_outbox DROP COLUMN record_xid;
DROP TABLE event_handoffs;
ALTER TABLE event_outbox SET (fillfactor = 50);
