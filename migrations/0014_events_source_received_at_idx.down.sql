SET lock_timeout = '10s';
SET statement_timeout = '5min';

DROP INDEX events_source_received_at_idx;
