SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- One row per inbound webhook, keyed by the sender's own event id. The
-- primary key is what makes a repeat delivery a duplicate: Postgres decides
-- who is first, also across gateway replicas.
CREATE TABLE events (
    source           text        NOT NULL,
    external_id      text        NOT NULL,
    received_at      timestamptz NOT NULL DEFAULT now(),
    last_received_at timestamptz NOT NULL DEFAULT now(),
    deliveries       integer     NOT NULL DEFAULT 1,
    content_type     text        NOT NULL DEFAULT '',
    headers          jsonb       NOT NULL DEFAULT '{}',
    payload          bytea       NOT NULL,
    -- Ordering guard inputs, extracted at ingest when the source sets `order`.
    order_entity     text,
    order_version    text,
    -- NULL while the hand-off to the queue is pending: the relay's outbox.
    enqueued_at      timestamptz,
    PRIMARY KEY (source, external_id)
);

-- The relay scans only events whose hand-off is pending.
CREATE INDEX events_pending_idx ON events (received_at) WHERE enqueued_at IS NULL;
-- Retention and the admin listing (newest first).
CREATE INDEX events_received_at_idx ON events (received_at);
