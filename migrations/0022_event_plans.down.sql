SET lock_timeout = '10s';
SET statement_timeout = '5min';

DROP FUNCTION webhookd_event_state(boolean, boolean, boolean, text[]);
DROP FUNCTION webhookd_run_status(text, boolean, integer, timestamptz);
UPDATE job_runs SET status = 'done' WHERE status = 'filtered';
ALTER TABLE job_runs DROP CONSTRAINT job_runs_status_check;
ALTER TABLE job_runs ADD CONSTRAINT job_runs_status_check
    CHECK (status IN ('running', 'done', 'failed', 'dead', 'skipped_stale'));
ALTER TABLE job_runs DROP COLUMN hold_reason;
ALTER TABLE events DROP COLUMN plan;
ALTER TABLE event_outbox DROP COLUMN handed_off;
