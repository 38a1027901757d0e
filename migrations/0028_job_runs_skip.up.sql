SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- Ordered delivery (fifo, on_failure: hold): an operator lets an entity go
-- on past a failed or dead event by skipping its run (dedupe/fifo.go).
-- The run keeps its status (it was never delivered); the skip is recorded
-- like a forced replay, who, when and why, and the entity's order counts
-- the run as settled while it stays failed or dead.
ALTER TABLE job_runs ADD COLUMN skipped_at timestamptz;
ALTER TABLE job_runs ADD COLUMN skipped_by text;
ALTER TABLE job_runs ADD COLUMN skip_reason text;
