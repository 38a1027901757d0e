SET lock_timeout = '10s';
ALTER TABLE entity_versions
    DROP COLUMN IF EXISTS inflight_until,
    DROP COLUMN IF EXISTS inflight_key;
