SET lock_timeout = '10s';
SET statement_timeout = '5min';

DROP INDEX events_external_id_pattern_idx;
