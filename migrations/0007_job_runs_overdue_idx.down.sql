SET lock_timeout = '10s';
DROP INDEX IF EXISTS job_runs_overdue_idx;
