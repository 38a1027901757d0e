SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- Issues: a destination's failures grouped by (source, destination,
-- cause), one open at a time per group (the partial unique index: two
-- workers failing at once update one row). cause is the answer's status
-- code ("500"), "timeout", "connection", "rule" or "circuit open".
-- successes counts the destination's successful calls since the last
-- failure; at issues.close_after the issue closes. The notified_* columns
-- are claimed by one process with a conditional UPDATE … RETURNING, so
-- each message is sent once whatever the number of workers.
CREATE TABLE issues (
    id                bigserial   PRIMARY KEY,
    source            text        NOT NULL,
    destination       text        NOT NULL,
    cause             text        NOT NULL,
    state             text        NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'closed', 'resolved')),
    count             bigint      NOT NULL DEFAULT 1,
    successes         integer     NOT NULL DEFAULT 0,
    first_seen        timestamptz NOT NULL DEFAULT now(),
    last_seen         timestamptz NOT NULL DEFAULT now(),
    ended_at          timestamptz,
    resolved_by       text,
    resolve_reason    text,
    notified_open_at  timestamptz,
    notified_close_at timestamptz,
    reminded_at       timestamptz
);
CREATE UNIQUE INDEX issues_open_idx ON issues (source, destination, cause) WHERE state = 'open';
CREATE INDEX issues_last_seen_idx ON issues (last_seen DESC);
CREATE INDEX issues_ended_at_idx ON issues (ended_at) WHERE state <> 'open';

-- The events an issue affected, once each, at most 10,000 per issue (the
-- upsert stops adding past that; the issue says so).
CREATE TABLE issue_events (
    issue_id    bigint      NOT NULL REFERENCES issues (id) ON DELETE CASCADE,
    external_id text        NOT NULL,
    first_seen  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (issue_id, external_id)
);
