SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- The admin search by event id (q=: exact or a prefix, case-sensitive)
-- reads this index (dedupe/eventlist.go): text_pattern_ops makes
-- "external_id LIKE 'prefix%'" an index range whatever the database's
-- collation. Built at start-up while the new processes wait: stop the
-- old ones first, as for any migration.
CREATE INDEX events_external_id_pattern_idx ON events (external_id text_pattern_ops);
