SET lock_timeout = '10s';
SET statement_timeout = '5min';

ALTER TABLE events DROP COLUMN trace_parent;
