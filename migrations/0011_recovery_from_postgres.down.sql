SET lock_timeout = '10s';
SET statement_timeout = '5min';

ALTER TABLE delivery_attempts RESET (fillfactor);
ALTER TABLE delivery_attempts DROP COLUMN outcome, DROP COLUMN state;

DROP INDEX job_runs_retry_idx;
CREATE INDEX job_runs_overdue_idx ON job_runs ((COALESCE(started_at, created_at)))
    WHERE status = 'failed' AND NOT permanent;
ALTER TABLE job_runs DROP COLUMN retry_at;

-- Outbox rows of events that have runs were settled under the old rule.
DELETE FROM event_outbox o
WHERE EXISTS (SELECT 1 FROM job_runs r WHERE r.source = o.source AND r.external_id = o.external_id);
