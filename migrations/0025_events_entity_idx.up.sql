SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- Ordered delivery in fifo mode (dedupe/fifo.go) asks, before each call,
-- which earlier event of the same entity is not settled yet: the events
-- of one source and entity, in the order they were recorded.
CREATE INDEX IF NOT EXISTS events_entity_idx ON events (order_entity, source, received_at)
    WHERE order_entity IS NOT NULL;
