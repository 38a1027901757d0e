package dedupe

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// sweepLockID is the advisory lock class that lets one replica sweep at a
// time; the lock's second key is the schema's hash, so deployments sharing
// a database in different schemas do not block each other.
const sweepLockID int32 = 0x77656201

// SweptRun is a run the sweeper reset because its lease had passed.
type SweptRun struct {
	Key         string
	Source      string
	ExternalID  string
	Destination string
	Generation  int
	// Status is failed (to be retried) or dead (attempts exhausted).
	Status   string
	Attempts int
}

const sweepSQL = `
UPDATE job_runs r SET
    attempts = r.attempts + 1,
    status = CASE WHEN r.attempts + 1 >= r.max_attempts THEN 'dead' ELSE 'failed' END,
    completed_at = CASE WHEN r.attempts + 1 >= r.max_attempts THEN now() END,
    last_error = 'lease expired: the worker stopped without finishing',
    lease_until = NULL,
    held_until = NULL
WHERE r.key IN (
    SELECT key FROM job_runs
    WHERE status = 'running' AND lease_until < now()
    ORDER BY lease_until
    LIMIT $1
    FOR UPDATE SKIP LOCKED)
RETURNING r.key, r.source, r.external_id, r.destination, r.generation, r.status, r.attempts`

// SweepExpired resets up to limit running runs whose lease has passed:
// each becomes failed with attempts + 1, or dead once attempts reach
// max_attempts. Only one replica sweeps at a time; the others get nothing
// back. The caller re-enqueues the failed runs with the same key.
func (s *Store) SweepExpired(ctx context.Context, limit int) ([]SweptRun, error) {
	var swept []SweptRun
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var locked bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1, hashtext(current_schema()))`, sweepLockID).Scan(&locked); err != nil {
			return err
		}
		if !locked {
			return nil
		}
		rows, err := tx.Query(ctx, sweepSQL, limit)
		if err != nil {
			return err
		}
		swept, err = pgx.CollectRows(rows, pgx.RowToStructByPos[SweptRun])
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("error sweeping expired runs: %w", err)
	}
	return swept, nil
}

const overdueSQL = `
SELECT key, source, external_id, destination, generation, status, attempts
FROM job_runs
WHERE status = 'failed' AND NOT permanent
  AND COALESCE(started_at, created_at) < now() - $1 * interval '1 millisecond'
ORDER BY COALESCE(started_at, created_at)
LIMIT $2`

// OverdueRetries returns up to limit retryable failed runs not claimed for
// longer than idle: longer than any backoff, so their task was lost (a
// queue that dropped it, an enqueue that failed after a replay was
// recorded). The caller enqueues them again with the same key; a task
// that does still exist makes that a no-op.
func (s *Store) OverdueRetries(ctx context.Context, idle time.Duration, limit int) ([]SweptRun, error) {
	rows, err := s.pool.Query(ctx, overdueSQL, idle.Milliseconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("error finding overdue retries: %w", err)
	}
	runs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[SweptRun])
	if err != nil {
		return nil, fmt.Errorf("error finding overdue retries: %w", err)
	}
	return runs, nil
}
