SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- Requests to /webhooks/:source answered 4xx (a bad signature, a body too
-- large, no event id, an unknown source), kept so an operator sees what a
-- sender's dashboard reports without reading logs (SPEC: "Rejected
-- requests are records too"). Bounded per source and minute by the
-- gateway, headers masked as an event's, the body cut at 4 KiB, deleted
-- after rejected.retention.
CREATE TABLE rejected_requests (
    id             bigserial   PRIMARY KEY,
    received_at    timestamptz NOT NULL DEFAULT now(),
    source         text        NOT NULL,
    remote         text        NOT NULL,
    status         integer     NOT NULL,
    reason         text        NOT NULL,
    headers        jsonb,
    body           bytea       NOT NULL,
    body_bytes     integer     NOT NULL
);
CREATE INDEX rejected_requests_received_at_idx ON rejected_requests (received_at);
CREATE INDEX rejected_requests_source_idx ON rejected_requests (source, received_at);
