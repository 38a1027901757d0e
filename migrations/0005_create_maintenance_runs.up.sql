SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- One row per run of a scheduled maintenance job (retention, duplicate
-- check), so an operator can see when it last succeeded.
CREATE TABLE maintenance_runs (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind         text        NOT NULL,
    started_at   timestamptz NOT NULL,
    finished_at  timestamptz NOT NULL DEFAULT now(),
    rows_deleted bigint      NOT NULL DEFAULT 0,
    found        bigint      NOT NULL DEFAULT 0,
    error        text
);

CREATE INDEX maintenance_runs_kind_idx ON maintenance_runs (kind, finished_at DESC);
