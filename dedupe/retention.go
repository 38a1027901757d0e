package dedupe

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Maintenance kinds, as stored in maintenance_runs.kind.
const (
	// KindRetention is a retention run ([Store.RunRetention]).
	KindRetention = "retention"
	// KindDuplicateCheck is a run of the duplicate check ([Store.DuplicateKeys]).
	KindDuplicateCheck = "duplicate_check"
)

// retentionLockID is the advisory lock that lets one replica run retention
// at a time.
const retentionLockID int32 = 0x77656202

// DefaultRetention is how long events, runs and calls are kept where the
// configuration says nothing (`retention`).
const DefaultRetention = 720 * time.Hour

// DefaultRetentionBatch is the rows deleted per statement when
// RetentionOptions.BatchSize is not set.
const DefaultRetentionBatch = 1000

// RetentionOptions tunes one retention run.
type RetentionOptions struct {
	// Retention is the window: rows older than it are deleted. Required.
	Retention time.Duration
	// BatchSize caps the rows one statement deletes, so no statement holds
	// locks for long. Defaults to DefaultRetentionBatch.
	BatchSize int
	// StatementTimeout bounds one batch. Defaults to 30s.
	StatementTimeout time.Duration
}

// RetentionResult is what one retention run deleted.
type RetentionResult struct {
	// Ran is false when another replica was running retention; nothing
	// was deleted or recorded then.
	Ran bool
	// Cutoff is the database time before which rows were deleted.
	Cutoff time.Time
	// Events, Runs, Attempts, Digests, HandOffs, MaintenanceRuns and
	// Issues count deleted rows per table (an issue's events go with it).
	Events, Runs, Attempts, Digests, HandOffs, MaintenanceRuns, Issues int64
	// Batches counts the delete statements run.
	Batches int
}

// Total returns the rows deleted from all tables.
func (r RetentionResult) Total() int64 {
	return r.Events + r.Runs + r.Attempts + r.Digests + r.HandOffs + r.MaintenanceRuns + r.Issues
}

// Each retention statement deletes at most $2 rows older than $1, chosen
// through an index on the row's time and skipping rows other transactions
// hold, and returns how many it deleted.
var (
	// Calls logged in delivery_attempts; one still being made stays until
	// its outcome (or the sweep's 'unknown') is stored.
	retainAttemptsSQL = `
DELETE FROM delivery_attempts WHERE id IN (
    SELECT id FROM delivery_attempts WHERE created_at < $1 AND state <> 'calling'
    ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)`

	// Runs that ended (or never started) before the cutoff; a running run
	// is left to the sweeper.
	retainRunsSQL = `
DELETE FROM job_runs WHERE key IN (
    SELECT key FROM job_runs
    WHERE created_at < $1 AND status <> 'running' AND COALESCE(completed_at, created_at) < $1
    ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)`

	// Events last delivered before the cutoff and with no running run (a
	// sender still redelivering an event keeps it, and so keeps the repeat
	// a duplicate), with their repeat counts and their outbox rows if
	// their hand-off never happened.
	retainEventsSQL = `
WITH doomed AS MATERIALIZED (
    SELECT e.source, e.external_id FROM events e
    WHERE e.received_at < $1 AND ` + lastReceivedSQL("e.source", "e.external_id") + ` < $1
      AND NOT EXISTS (SELECT 1 FROM job_runs r
                      WHERE r.source = e.source AND r.external_id = e.external_id AND r.status = 'running')
    ORDER BY e.received_at LIMIT $2 FOR UPDATE OF e SKIP LOCKED
), unqueued AS (
    DELETE FROM event_outbox WHERE (source, external_id) IN (SELECT source, external_id FROM doomed)
), uncounted AS (
    DELETE FROM event_repeats WHERE (source, external_id) IN (SELECT source, external_id FROM doomed)
)
DELETE FROM events WHERE (source, external_id) IN (SELECT source, external_id FROM doomed)`

	// Signed content digests (signedcopies.go) whose window ended before
	// the cutoff; one that ended since counts as absent already.
	retainDigestsSQL = `
DELETE FROM event_digests WHERE (source, digest) IN (
    SELECT source, digest FROM event_digests WHERE expires_at < $1
    ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)`

	// The relay's hand-off marks (outbox.go) older than the cutoff and
	// than any outbox row, so no row left can be of their transaction
	// (its rows were recorded before it was marked); the hour's margin
	// keeps a mark whose clock stepped back.
	retainHandOffsSQL = `
DELETE FROM event_handoffs WHERE record_xid IN (
    SELECT record_xid FROM event_handoffs
    WHERE handed_off_at < LEAST($1, (SELECT min(received_at) FROM event_outbox) - interval '1 hour')
    ORDER BY handed_off_at LIMIT $2 FOR UPDATE SKIP LOCKED)`

	// Old records of maintenance runs; the newest of each kind stays so
	// the last success remains visible.
	retainMaintenanceSQL = `
DELETE FROM maintenance_runs WHERE id IN (
    SELECT m.id FROM maintenance_runs m
    WHERE m.finished_at < $1
      AND m.id <> (SELECT max(id) FROM maintenance_runs l WHERE l.kind = m.kind AND l.error IS NULL)
    ORDER BY m.finished_at LIMIT $2 FOR UPDATE SKIP LOCKED)`

	// Issues that closed or were resolved before the cutoff, with their
	// events (ON DELETE CASCADE); an open issue stays however old.
	retainIssuesSQL = `
DELETE FROM issues WHERE id IN (
    SELECT id FROM issues WHERE state <> 'open' AND ended_at < $1
    ORDER BY ended_at LIMIT $2 FOR UPDATE SKIP LOCKED)`
)

// RunRetention deletes events, job runs, logged calls, signed content
// digests, hand-off marks, old maintenance records and ended issues
// older than opts.Retention, in batches of at most opts.BatchSize rows,
// each batch its own short transaction; it loops over a table until a
// batch comes back short. Entity versions are kept: they are what keeps
// a late, older event from being forwarded.
//
// Only one replica runs retention at a time (a session advisory lock,
// released when the run ends or its connection drops); the others return
// at once with Ran false. A run that got the lock is recorded in
// maintenance_runs, with its error if it failed. ctx ending stops the run
// between batches.
func (s *Store) RunRetention(ctx context.Context, opts RetentionOptions) (RetentionResult, error) {
	if opts.Retention <= 0 {
		return RetentionResult{}, errors.New("error running retention: retention must be positive")
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultRetentionBatch
	}
	if opts.StatementTimeout <= 0 {
		opts.StatementTimeout = 30 * time.Second
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return RetentionResult{}, fmt.Errorf("error running retention: %w", err)
	}
	defer conn.Release()
	var locked bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, hashtext(current_schema()))`, retentionLockID).Scan(&locked); err != nil {
		return RetentionResult{}, fmt.Errorf("error running retention: %w", err)
	}
	if !locked {
		return RetentionResult{}, nil
	}
	defer unlockAdvisory(conn, retentionLockID)

	res := RetentionResult{Ran: true}
	var started time.Time
	if err := conn.QueryRow(ctx, `SELECT now(), now() - $1 * interval '1 millisecond'`,
		opts.Retention.Milliseconds()).Scan(&started, &res.Cutoff); err != nil {
		return res, fmt.Errorf("error running retention: %w", err)
	}
	runErr := s.retain(ctx, conn, opts, &res)
	run := MaintenanceRun{Kind: KindRetention, StartedAt: started, RowsDeleted: res.Total()}
	if runErr != nil {
		run.Error = runErr.Error()
	}
	// Record the run also when ctx ended: the record is what an operator
	// looks at.
	recCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.RecordMaintenance(recCtx, run); err != nil {
		return res, errors.Join(runErr, err)
	}
	if runErr != nil {
		return res, fmt.Errorf("error running retention: %w", runErr)
	}
	return res, nil
}

// retain runs the delete statements table by table.
func (s *Store) retain(ctx context.Context, conn *pgxpool.Conn, opts RetentionOptions, res *RetentionResult) error {
	for _, step := range []struct {
		table string
		sql   string
		count *int64
	}{
		{"delivery_attempts", retainAttemptsSQL, &res.Attempts},
		{"job_runs", retainRunsSQL, &res.Runs},
		{"events", retainEventsSQL, &res.Events},
		{"event_digests", retainDigestsSQL, &res.Digests},
		{"event_handoffs", retainHandOffsSQL, &res.HandOffs},
		{"maintenance_runs", retainMaintenanceSQL, &res.MaintenanceRuns},
		{"issues", retainIssuesSQL, &res.Issues},
	} {
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			n, err := deleteBatch(ctx, conn, step.sql, res.Cutoff, opts)
			if err != nil {
				return fmt.Errorf("deleting from %s: %w", step.table, err)
			}
			res.Batches++
			*step.count += n
			if n < int64(opts.BatchSize) {
				break
			}
		}
	}
	return nil
}

// deleteBatch runs one retention statement. It is planned at every run,
// for the table as it is: a plan kept from a run on nearly empty tables
// (a new deployment's first) read a whole table for every batch once the
// table grew; a batch is rare and large, so planning it costs nothing.
func deleteBatch(ctx context.Context, conn *pgxpool.Conn, sql string, cutoff time.Time, opts RetentionOptions) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.StatementTimeout)
	defer cancel()
	tag, err := conn.Exec(ctx, sql, plannedEachRun, cutoff, opts.BatchSize)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// unlockAdvisory releases a session advisory lock; if that fails the
// connection is closed, which releases it too.
func unlockAdvisory(conn *pgxpool.Conn, id int32) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1, hashtext(current_schema()))`, id); err != nil {
		_ = conn.Conn().Close(ctx)
	}
}

// MaintenanceRun is one recorded run of a scheduled maintenance job.
type MaintenanceRun struct {
	// ID is the record's id; 0 before it is recorded.
	ID int64
	// Kind is KindRetention or KindDuplicateCheck.
	Kind string
	// StartedAt and FinishedAt bound the run. FinishedAt defaults to the
	// database's now() when recorded.
	StartedAt, FinishedAt time.Time
	// RowsDeleted counts rows a retention run deleted.
	RowsDeleted int64
	// Found counts what a check found (duplicate keys).
	Found int64
	// Error is empty for a successful run.
	Error string
}

const recordMaintenanceSQL = `
INSERT INTO maintenance_runs (kind, started_at, rows_deleted, found, error)
VALUES ($1, $2, $3, $4, NULLIF($5, ''))`

// RecordMaintenance records a finished maintenance run, finished now.
func (s *Store) RecordMaintenance(ctx context.Context, run MaintenanceRun) error {
	if run.StartedAt.IsZero() {
		run.StartedAt = time.Now()
	}
	if _, err := s.pool.Exec(ctx, recordMaintenanceSQL, run.Kind, run.StartedAt, run.RowsDeleted, run.Found, run.Error); err != nil {
		return fmt.Errorf("error recording maintenance run: %w", err)
	}
	return nil
}

const lastMaintenanceSQL = `
SELECT id, kind, started_at, finished_at, rows_deleted, found, COALESCE(error, '')
FROM maintenance_runs
WHERE kind = $1 AND error IS NULL
ORDER BY finished_at DESC, id DESC
LIMIT 1`

// LastMaintenance returns the latest successful run of kind
// (KindRetention, KindDuplicateCheck). It returns ErrNotFound when kind
// never succeeded.
func (s *Store) LastMaintenance(ctx context.Context, kind string) (MaintenanceRun, error) {
	rows, err := s.pool.Query(ctx, lastMaintenanceSQL, kind)
	if err != nil {
		return MaintenanceRun{}, fmt.Errorf("error reading last maintenance run: %w", err)
	}
	run, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[MaintenanceRun])
	if err != nil {
		return MaintenanceRun{}, fmt.Errorf("error reading last %s run: %w", kind, translate(err))
	}
	return run, nil
}
