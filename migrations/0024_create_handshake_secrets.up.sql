SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- Signing secrets a sender delivers in its handshake instead of showing
-- them to the operator (Asana's X-Hook-Secret): one per source, the
-- first handshake's (SECURITY.md); an operator resets a source by
-- deleting its row. Every process reads it, so a handshake answered by
-- one replica verifies on all.
CREATE TABLE handshake_secrets (
    source     text        PRIMARY KEY,
    secret     text        NOT NULL,
    learned_at timestamptz NOT NULL DEFAULT now()
);
