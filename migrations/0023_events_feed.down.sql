SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- Drops events_feed_idx and, owned by feed_seq, events_feed_seq with them.
ALTER TABLE events DROP COLUMN feed_xid, DROP COLUMN feed_seq;
