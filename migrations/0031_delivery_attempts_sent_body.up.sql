SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- A destination with a `transform` rule is sent a body that is not the
-- event's own: each call keeps the first 4 KiB of what it sent, so the
-- attempt log shows what the destination got (and what was signed).
-- Nullable without a default: adding it rewrites nothing.
ALTER TABLE delivery_attempts ADD COLUMN sent_body bytea;
