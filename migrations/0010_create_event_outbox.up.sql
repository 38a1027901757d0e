SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- The relay's outbox: one narrow row per event whose hand-off to the queue
-- is pending, written by the statement that records the event and deleted
-- once its tasks are in the queue. It replaces events.enqueued_at: marking
-- an event handed off used to rewrite its whole row (payload included, a
-- new version in every index, as much WAL as the insert itself); deleting
-- a narrow row costs a fraction of that. An event with no row here has been
-- handed off.
CREATE TABLE event_outbox (
    source      text        NOT NULL,
    external_id text        NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, external_id)
);

-- The relay's scan takes the oldest first.
CREATE INDEX event_outbox_received_at_idx ON event_outbox (received_at);

INSERT INTO event_outbox (source, external_id, received_at)
SELECT source, external_id, received_at FROM events WHERE enqueued_at IS NULL;

-- Drops events_pending_idx with it.
ALTER TABLE events DROP COLUMN enqueued_at;
