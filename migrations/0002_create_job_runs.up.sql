SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- One row per job key (<source>:<destination>:<external_id>[#generation]).
-- Claimed with one INSERT … ON CONFLICT statement before the destination is
-- called; see dedupe/doc.go for the state machine.
CREATE TABLE job_runs (
    key          text        PRIMARY KEY,
    source       text        NOT NULL,
    external_id  text        NOT NULL,
    destination  text        NOT NULL,
    generation   integer     NOT NULL DEFAULT 1,
    status       text        NOT NULL
        CHECK (status IN ('running', 'done', 'failed', 'dead', 'skipped_stale')),
    -- Tries that count toward max_attempts: failures and crashes.
    attempts     integer     NOT NULL DEFAULT 0,
    -- Every claim that may call the destination; sent as Webhookd-Attempt.
    calls        integer     NOT NULL DEFAULT 0,
    max_attempts integer     NOT NULL,
    -- Set when a failure is permanent (a 4xx): nothing retries it but a replay.
    permanent    boolean     NOT NULL DEFAULT false,
    result       jsonb,
    last_error   text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    started_at   timestamptz,
    completed_at timestamptz,
    -- A run still running after lease_until is reset by the sweeper.
    lease_until  timestamptz,
    -- A destination asked to wait (429, 503 + Retry-After) until then.
    held_until   timestamptz,
    -- Forced replays record who asked and why.
    replayed_by   text,
    replay_reason text
);

CREATE INDEX job_runs_event_idx ON job_runs (source, external_id);
CREATE INDEX job_runs_lease_idx ON job_runs (lease_until) WHERE status = 'running';
CREATE INDEX job_runs_created_at_idx ON job_runs (created_at);
