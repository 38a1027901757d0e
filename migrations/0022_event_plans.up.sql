SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- What operators see is what will happen (issue 25).
--
-- An event's runs are planned once, when it is recorded: the
-- destinations that want it then, kept with the event (events.plan).
-- Its state is computed over that plan and its runs, never over today's
-- configuration, so a destination added later does not make old events
-- queued, and a removed one leaves its runs visible. An event recorded
-- before plans were kept has a NULL plan: once it left the outbox every
-- destination of it had a run, so its runs are its plan; the reconciler
-- plans the few still in the outbox from the configuration when it next
-- reads them. Nothing is rewritten here.
ALTER TABLE events ADD COLUMN plan text[];

-- Whether the relay handed the event to the queue (its fast path's
-- enqueue succeeded): a task recovery finds missing for an event it did
-- not hand off is a routine hand-off (an import, Redis down at ingest, a
-- full fast path), counted apart from one Redis lost.
ALTER TABLE event_outbox ADD COLUMN handed_off boolean NOT NULL DEFAULT false;

-- Why a run waits while its destination asked it to (a 429, a 503 with
-- Retry-After) or another event of its entity is in flight.
ALTER TABLE job_runs ADD COLUMN hold_reason text;

-- filtered: a rule rejected the event at delivery time; settled.
ALTER TABLE job_runs DROP CONSTRAINT job_runs_status_check;
ALTER TABLE job_runs ADD CONSTRAINT job_runs_status_check
    CHECK (status IN ('running', 'done', 'failed', 'dead', 'skipped_stale', 'filtered'));

-- The status a run is shown with, from what is stored: the one rule
-- (dedupe/state.go documents it). A hold keeps the run running with
-- held_until set; a retryable failure with no failed attempt left in its
-- budget is a replay waiting for a worker.
CREATE FUNCTION webhookd_run_status(status text, permanent boolean, attempts integer, held_until timestamptz)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
SELECT CASE
    WHEN status = 'running' AND held_until IS NOT NULL THEN 'held'
    WHEN status = 'failed' AND NOT permanent AND attempts = 0 THEN 'queued'
    WHEN status = 'failed' AND NOT permanent THEN 'retrying'
    ELSE status
END
$$;

-- An event's state: the most pressing of its runs' shown statuses (a
-- planned destination without a run counts as queued), then received
-- while it has no run and its hand-off is pending (an event recorded
-- before plans were kept), recorded_only for an import recorded as
-- delivered elsewhere that has no run.
CREATE FUNCTION webhookd_event_state(handed_off boolean, recorded_only boolean, has_runs boolean, statuses text[])
RETURNS text LANGUAGE sql IMMUTABLE STRICT AS $$
SELECT CASE
    WHEN recorded_only AND NOT has_runs THEN 'recorded_only'
    WHEN 'dead' = ANY (statuses) THEN 'dead'
    WHEN 'failed' = ANY (statuses) THEN 'failed'
    WHEN 'retrying' = ANY (statuses) THEN 'retrying'
    WHEN 'held' = ANY (statuses) THEN 'held'
    WHEN 'running' = ANY (statuses) THEN 'running'
    WHEN 'queued' = ANY (statuses) THEN 'queued'
    WHEN NOT handed_off AND NOT has_runs THEN 'received'
    WHEN 'skipped_stale' = ANY (statuses) AND NOT 'done' = ANY (statuses) THEN 'skipped_stale'
    ELSE 'done'
END
$$;
