package dedupe

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Recovery is driven by what Postgres records. A run is unsettled while it
// is running (its worker may die: [Store.SweepExpired] takes it back once
// its lease passes) or waiting for a try (retry_at set: a retryable
// failure, a hold, a replay; [Store.DueRuns] lists those whose try is
// due); an event is unsettled while it is in the outbox (outbox.go).
// The reconciler in package jobs reads these and makes sure each has a
// live task, whatever Redis kept. Every step is one statement, so a
// process may die between any two of them.

// recoveryLockID is the advisory lock class that lets one replica run a
// recovery pass at a time; the lock's second key is the schema's hash,
// so deployments sharing a database in different schemas do not block
// each other.
const recoveryLockID int32 = 0x77656201

// ErrRecoveryBusy is returned by [Store.WithRecoveryLock] when another
// process is running a recovery pass.
var ErrRecoveryBusy = errors.New("another process is running a recovery pass")

// WithRecoveryLock runs pass while holding the recovery lock, or returns
// ErrRecoveryBusy at once when another process holds it. The lock is a
// transaction-level advisory lock on a connection of its own that stays
// idle while pass runs on the pool; the server ends that transaction
// (and so frees the lock) if it stays idle longer than hold, so a process
// that dies or loses its network mid-pass cannot keep the lock. Keep hold
// above the longest pass.
func (s *Store) WithRecoveryLock(ctx context.Context, hold time.Duration, pass func(context.Context) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("error taking the recovery lock: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL idle_in_transaction_session_timeout = %d", max(hold.Milliseconds(), 1000))); err != nil {
		return fmt.Errorf("error taking the recovery lock: %w", err)
	}
	var locked bool
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1, hashtext(current_schema()))`, recoveryLockID).Scan(&locked); err != nil {
		return fmt.Errorf("error taking the recovery lock: %w", err)
	}
	if !locked {
		return ErrRecoveryBusy
	}
	return pass(ctx)
}

// UnsettledRun is a run recovery acts on: one whose lease passed, or
// whose next try is due.
type UnsettledRun struct {
	Key         string
	Source      string
	ExternalID  string
	Destination string
	Generation  int
	// Status is the run's status: failed (to be retried), dead (attempts
	// exhausted by a sweep), or running (a hold).
	Status   string
	Attempts int
	// Due is when its next try was due (the sweep's time for a swept run).
	Due time.Time
	// TraceParent is the event's traceparent (Event.TraceParent), or
	// empty, so recovery's decisions show in the event's trace.
	TraceParent string
}

// traceParentSQL is the traceparent of the event (source, externalID, two
// SQL expressions), "" when it has none: one lookup by primary key.
func traceParentSQL(source, externalID string) string {
	return `COALESCE((SELECT e.trace_parent FROM events e WHERE e.source = ` + source + ` AND e.external_id = ` + externalID + `), '')`
}

// sweepSQL turns running runs whose lease has passed into failed runs
// with attempts + 1 (a held run: attempts kept) and their retry due now,
// or dead ones once attempts reach max_attempts, and logs their claimed
// call as 'unknown': the worker died (or outlived its lease) between its
// claim and storing the call's outcome, so the destination may have acted
// on it. The claim writes no row for its call (claimSQL): a run swept
// while in its call (held_until empty: not a hold) whose call has no row
// gets one, dated when the claim started it; an ordered event's call is
// logged by the ordering guard only once it lets the call go, so its row,
// if any, is marked instead (as is any row still 'calling').
var sweepSQL = `
WITH expired AS MATERIALIZED (
    SELECT key, held_until IS NULL AS in_call, held_until IS NULL AND attempts + 1 >= max_attempts AS last_try
    FROM job_runs
    WHERE status = 'running' AND lease_until < now()
    ORDER BY lease_until
    LIMIT $1
    FOR UPDATE SKIP LOCKED
), swept AS (
    -- A run held (held_until set: waiting for its entity's order, a
    -- destination's Retry-After, a rate) was not in a call: its lease
    -- passing (its task slow to come back through a long queue) is no
    -- attempt, and counting it made a long-held fifo event dead after
    -- fewer than max_attempts tries. It is made due now, attempts kept.
    UPDATE job_runs r SET
        attempts = r.attempts + x.in_call::int,
        status = CASE WHEN x.last_try THEN 'dead' ELSE 'failed' END,
        completed_at = CASE WHEN x.last_try THEN now() END,
        retry_at = CASE WHEN x.last_try THEN NULL ELSE now() END,
        last_error = CASE WHEN x.in_call THEN 'lease expired: the worker stopped without finishing'
                          ELSE 'lease expired while held (not an attempt): tried again now' END,
        lease_until = NULL,
        held_until = NULL
    FROM expired x
    WHERE r.key = x.key
    RETURNING r.key, r.source, r.external_id, r.destination, r.generation, r.status, r.attempts, now() AS due,
              ` + traceParentSQL("r.source", "r.external_id") + ` AS trace_parent,
              r.calls, r.started_at
), unknown AS (
    -- Found by key (LATERAL … OFFSET 0): a join let a plan made while
    -- the table was small read all of delivery_attempts on every sweep.
    UPDATE delivery_attempts a SET state = 'unknown'
    FROM swept s
    CROSS JOIN LATERAL (SELECT ctid AS id FROM delivery_attempts WHERE key = s.key AND state = 'calling' OFFSET 0) c
    WHERE a.ctid = c.id AND a.state = 'calling'
), unlogged AS (
    INSERT INTO delivery_attempts (key, call, succeeded, duration_ms, state, created_at)
    SELECT s.key, s.calls, false, 0, 'unknown', COALESCE(s.started_at, now())
    FROM swept s
    JOIN expired x ON x.key = s.key
    WHERE x.in_call AND s.calls > 0
      AND NOT EXISTS (SELECT 1 FROM delivery_attempts a WHERE a.key = s.key AND a.call = s.calls)
      -- Read by the event's key: the entity index (migration 0025) would
      -- walk every ordered event.
      AND (SELECT e.order_entity FROM events e WHERE e.source = s.source AND e.external_id = s.external_id) IS NULL
)
SELECT key, source, external_id, destination, generation, status, attempts, due, trace_parent FROM swept`

// SweepExpired resets up to limit running runs whose lease has passed:
// each becomes failed with attempts + 1 and its retry due now, or dead
// once attempts reach max_attempts; the call it claimed is logged as one
// of unknown outcome. Runs another sweep is resetting are skipped.
// The caller makes sure the failed ones have a task.
func (s *Store) SweepExpired(ctx context.Context, limit int) ([]UnsettledRun, error) {
	rows, err := s.pool.Query(ctx, sweepSQL, limit)
	if err != nil {
		return nil, fmt.Errorf("error sweeping expired runs: %w", err)
	}
	swept, err := pgx.CollectRows(rows, pgx.RowToStructByPos[UnsettledRun])
	if err != nil {
		return nil, fmt.Errorf("error sweeping expired runs: %w", err)
	}
	return swept, nil
}

// RunCursor is where a walk through due runs resumes: after the run it
// names, in the order (retry_at, key). The zero cursor starts at the
// earliest.
type RunCursor struct {
	Due time.Time
	Key string
}

// dueRunsSQL reads up to $4 runs whose next try was due more than $1 ms
// ago, after the cursor ($2, $3), earliest first. job_runs_retry_idx
// holds only runs waiting for a try.
var dueRunsSQL = `
SELECT key, source, external_id, destination, generation, status, attempts, retry_at,
       ` + traceParentSQL("job_runs.source", "job_runs.external_id") + `
FROM job_runs
WHERE retry_at < now() - $1 * interval '1 millisecond'
  AND retry_at >= $2
  AND (retry_at, key) > ($2, $3)
ORDER BY retry_at, key
LIMIT $4`

// DueRuns returns up to limit runs whose next try (a retry, the end of a
// hold, a replay) was due more than slack ago, after the cursor, earliest
// first, and the cursor of the last one (the zero cursor when none came
// back). A healthy queue has claimed them; the caller checks that their
// tasks still exist.
func (s *Store) DueRuns(ctx context.Context, after RunCursor, slack time.Duration, limit int) ([]UnsettledRun, RunCursor, error) {
	rows, err := s.pool.Query(ctx, dueRunsSQL, slack.Milliseconds(), after.Due, after.Key, limit)
	if err != nil {
		return nil, RunCursor{}, fmt.Errorf("error finding due runs: %w", err)
	}
	runs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[UnsettledRun])
	if err != nil {
		return nil, RunCursor{}, fmt.Errorf("error finding due runs: %w", err)
	}
	if len(runs) == 0 {
		return nil, RunCursor{}, nil
	}
	last := runs[len(runs)-1]
	return runs, RunCursor{Due: last.Due, Key: last.Key}, nil
}
