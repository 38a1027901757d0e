SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- Every destination call, successful or not. The duplicate check counts keys
-- with more than one successful call here.
CREATE TABLE delivery_attempts (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key         text        NOT NULL,
    call        integer     NOT NULL,
    status_code integer,
    succeeded   boolean     NOT NULL,
    error       text,
    duration_ms double precision NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX delivery_attempts_key_idx ON delivery_attempts (key);
CREATE INDEX delivery_attempts_created_at_idx ON delivery_attempts (created_at);
