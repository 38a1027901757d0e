SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- The sweeper looks for retryable runs whose retry is overdue (their task
-- was lost); this keeps that look cheap.
CREATE INDEX job_runs_overdue_idx ON job_runs ((COALESCE(started_at, created_at)))
    WHERE status = 'failed' AND NOT permanent;
