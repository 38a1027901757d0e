SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- The event feed (GET /admin/events/stream, `webhookd listen`) reads
-- events in a stable order that never skips one committed late. An order
-- assigned at insert is not commit order: with several gateway replicas
-- (and several statements in flight in each) a transaction can insert a
-- lower position and commit after a higher one was read, and a reader
-- that had moved past it would never see it. So each event carries the
-- id of the transaction that inserted it (feed_xid, 64-bit, never wraps)
-- and a tie-break within it (feed_seq), and the feed hands out only rows
-- whose transaction is older than the oldest transaction still running
-- (pg_snapshot_xmin of the reading statement's snapshot): no transaction
-- still able to commit can insert below that line, so a position there,
-- once read, is final (dedupe/feed.go).
--
-- The columns are added without a default and the defaults set after,
-- so nothing rewrites the table: events recorded before this migration
-- have no position and are not in the feed. The sequence only breaks
-- ties within one transaction, so each session may cache a range of it.
CREATE SEQUENCE events_feed_seq CACHE 64;
ALTER TABLE events ADD COLUMN feed_xid xid8, ADD COLUMN feed_seq bigint;
ALTER TABLE events
    ALTER COLUMN feed_xid SET DEFAULT pg_current_xact_id(),
    ALTER COLUMN feed_seq SET DEFAULT nextval('events_feed_seq');
ALTER SEQUENCE events_feed_seq OWNED BY events.feed_seq;

-- The feed's scan, in position order. Partial: rows recorded before this
-- migration are not in it. Built at start-up while the new processes
-- wait: stop the old ones first, as for any migration.
CREATE INDEX events_feed_idx ON events (feed_xid, feed_seq) WHERE feed_xid IS NOT NULL;
