SET lock_timeout = '10s';

-- Leave room on each page of event_outbox for a second version of each
-- row: the relay marks every row handed off (handed_off, no index) once
-- its tasks are in the queue, and on a full page that update is a copy
-- on another page plus an entry in both indexes instead of a HOT update
-- beside the row. The rows are narrow and short-lived (the claim deletes
-- them), so the space is small. Applies to pages written from now on.
ALTER TABLE event_outbox SET (fillfactor = 50);
