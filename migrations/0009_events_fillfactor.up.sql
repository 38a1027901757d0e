SET lock_timeout = '10s';

-- Leave room on each page of events for a new version of a row, so that
-- counting a repeat delivery (deliveries, last_received_at: no index)
-- is a HOT update on the same page instead of a copy elsewhere plus an
-- entry in every index. Applies to pages written from now on.
ALTER TABLE events SET (fillfactor = 85);
