SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- Recovery is driven by what Postgres records, never by a marker kept only
-- in Redis: the reconciler (jobs/reconcile.go) looks here for everything
-- that is not settled and makes sure a live task exists for each.

-- When a run's next try is due: set while it waits for one (a retryable
-- failure, or a hold on a running run: then it equals held_until), NULL
-- otherwise. A run whose retry is due and still unclaimed gets its task
-- written again if Redis lost it; the index holds only waiting runs.
ALTER TABLE job_runs ADD COLUMN retry_at timestamptz;
UPDATE job_runs SET retry_at = now() WHERE status = 'failed' AND NOT permanent;
UPDATE job_runs SET retry_at = held_until WHERE status = 'running' AND held_until IS NOT NULL;
DROP INDEX job_runs_overdue_idx;
CREATE INDEX job_runs_retry_idx ON job_runs (retry_at) WHERE retry_at IS NOT NULL;

-- A destination call is logged before it is made ('calling') and
-- completed when its outcome is stored ('finished'). A call whose worker
-- died in between becomes 'unknown' when the sweeper takes its run back:
-- the destination may or may not have acted on it, so the duplicate audit
-- counts it. Values: calling | finished | unknown (no CHECK constraint: it
-- would scan the whole table under an exclusive lock). outcome names how
-- a finished call ended (done, retry, permanent, hold); NULL before this
-- migration and while calling.
-- The call's row is updated in place when it finishes: leave room on each
-- page (applies to pages written from now on) so that is a HOT update.
ALTER TABLE delivery_attempts
    ADD COLUMN state text NOT NULL DEFAULT 'finished',
    ADD COLUMN outcome text;
ALTER TABLE delivery_attempts SET (fillfactor = 80);

-- The outbox now keeps an event until every destination has a run (the
-- reconciler deletes the row then), instead of until its tasks were
-- written to Redis. Events handed off before this migration and not yet
-- claimed get their row back, so a Redis that loses them cannot lose the
-- events. (Events with a run for some but not all destinations are not
-- covered; they were handed off and their other tasks are in the queue.)
INSERT INTO event_outbox (source, external_id, received_at)
SELECT e.source, e.external_id, e.received_at FROM events e
WHERE e.received_at > now() - interval '7 days'
  AND NOT EXISTS (SELECT 1 FROM job_runs r WHERE r.source = e.source AND r.external_id = e.external_id)
ON CONFLICT (source, external_id) DO NOTHING;
