SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- The admin listing of one source, newest first, reads this index
-- (dedupe/admin.go); without it a page of a quiet source walked the
-- whole received_at index. Built at start-up while the new processes
-- wait: stop the old ones first, as for any migration.
CREATE INDEX events_source_received_at_idx ON events (source, received_at);
