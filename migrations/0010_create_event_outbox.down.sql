SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- Events handed off get the time of the downgrade as their hand-off time.
ALTER TABLE events ADD COLUMN enqueued_at timestamptz;
UPDATE events e SET enqueued_at = now()
WHERE NOT EXISTS (SELECT 1 FROM event_outbox o WHERE o.source = e.source AND o.external_id = e.external_id);
CREATE INDEX events_pending_idx ON events (received_at) WHERE enqueued_at IS NULL;

DROP TABLE event_outbox;
