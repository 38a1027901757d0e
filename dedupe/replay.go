package dedupe

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// reopenSQL hands a failed or dead run back to the queue side: status
// failed, not permanent, attempts 0 (a replay starts a fresh budget of
// max_attempts; calls keeps counting, so Webhookd-Attempt still grows),
// its retry due now, so the reconciler writes its task if the replay's
// own enqueue does not happen.
// [Store.Claim] then takes it like any retryable failure. A run that is
// running, done or skipped_stale is left alone.
const reopenSQL = `
UPDATE job_runs SET
    status = 'failed',
    permanent = false,
    attempts = 0,
    completed_at = NULL,
    lease_until = NULL,
    held_until = NULL,
    retry_at = now(),
    replayed_by = NULLIF($2, ''),
    replay_reason = NULLIF($3, '')
WHERE key = $1 AND status IN ('failed', 'dead')
RETURNING ` + runColumns

// ReopenRun makes the failed or dead run of key retryable again with the
// same key, recording who asked (by) and why (reason). It reports false,
// and changes nothing, when the run is in any other state (a claim may
// have taken it meanwhile); it returns ErrNotFound when there is no run,
// and ErrTooSlow past AdminStatementTimeout.
func (s *Store) ReopenRun(ctx context.Context, key, by, reason string) (Run, bool, error) {
	run, reopened, err := s.changeRun(ctx, reopenSQL, key, by, reason)
	if err != nil {
		return Run{}, false, fmt.Errorf("error reopening run: %w", err)
	}
	return run, reopened, nil
}

// changeRun runs change, an UPDATE of key's run ($1) by an operator ($2,
// for reason $3) that returns the run only when its state allowed the
// change, in one admin transaction. changed is false, and run is the run
// as it stands, when the state did not; ErrNotFound when there is no
// run, ErrTooSlow past AdminStatementTimeout.
func (s *Store) changeRun(ctx context.Context, change, key, by, reason string) (run Run, changed bool, err error) {
	err = s.adminTx(ctx, true, func(tx pgx.Tx) error {
		var err error
		run, err = scanRun(tx.QueryRow(ctx, change, key, by, reason))
		if changed = err == nil; changed || !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		run, err = scanRun(tx.QueryRow(ctx, `SELECT `+runColumns+` FROM job_runs WHERE key = $1`, key))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Run{}, false, fmt.Errorf("run %s: %w", key, ErrNotFound)
	}
	return run, changed, err
}

// FirstRun is what [Store.OpenFirstRun] needs to record a replay's run
// for a destination that has none.
type FirstRun struct {
	// Key is the run's key (jobs.Key, generation 1).
	Key         string
	Source      string
	ExternalID  string
	Destination string
	// MaxAttempts is the destination's max_attempts.
	MaxAttempts int
	// By and Reason record who asked for the replay and why.
	By, Reason string
}

// openFirstRunSQL records the first run of an event for a destination,
// as failed (retryable) with no attempts and its retry due now, like a
// forced replay's generation: the claim takes it, and the reconciler
// writes its task if the replay's own enqueue is lost. An event imported
// with --record-only has no outbox row, so without this row nothing in
// Postgres would say its replay is owed. An existing run is left alone.
const openFirstRunSQL = `
INSERT INTO job_runs
    (key, source, external_id, destination, generation, status, attempts, calls, max_attempts,
     last_error, replayed_by, replay_reason, retry_at)
SELECT $1, $2, $3, $4, 1, 'failed', 0, 0, $5, 'replay: waiting for a worker', $6, NULLIF($7, ''), now()
WHERE EXISTS (SELECT 1 FROM events WHERE source = $2 AND external_id = $3)
ON CONFLICT (key) DO NOTHING
RETURNING ` + runColumns

// OpenFirstRun records the first run of an event for a destination that
// has none, due now. It reports false, and changes nothing, when the key
// has a run already (a worker claimed it meanwhile); it returns
// ErrNotFound when the event does not exist, and ErrTooSlow past
// AdminStatementTimeout.
func (s *Store) OpenFirstRun(ctx context.Context, r FirstRun) (Run, bool, error) {
	var (
		run    Run
		opened bool
	)
	err := s.adminTx(ctx, true, func(tx pgx.Tx) error {
		var err error
		run, err = scanRun(tx.QueryRow(ctx, openFirstRunSQL, r.Key, r.Source, r.ExternalID, r.Destination,
			max(r.MaxAttempts, 1), r.By, r.Reason))
		if opened = err == nil; opened || !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		run, err = scanRun(tx.QueryRow(ctx, `SELECT `+runColumns+` FROM job_runs WHERE key = $1`, r.Key))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Run{}, false, fmt.Errorf("event %s/%s: %w", r.Source, r.ExternalID, ErrNotFound)
	}
	if err != nil {
		if errors.Is(err, ErrTooSlow) {
			return Run{}, false, err
		}
		return Run{}, false, fmt.Errorf("error recording the replay's run: %w", err)
	}
	return run, opened, nil
}

// NewGeneration is what [Store.NewGeneration] needs to record a forced
// replay.
type NewGeneration struct {
	Source      string
	ExternalID  string
	Destination string
	// MaxAttempts is the destination's max_attempts.
	MaxAttempts int
	// By and Reason record who forced the replay and why.
	By, Reason string
	// KeyFunc returns the job key of a generation (jobs.Key). The
	// generation is chosen inside NewGeneration's transaction, and the
	// key is the row's primary key inserted there; the key's rules are
	// the jobs package's, which dedupe does not import.
	KeyFunc func(generation int) string
}

// lockEventSQL serialises forced replays of one event, so two at once get
// generations N+1 and N+2.
const lockEventSQL = `SELECT 1 FROM events WHERE source = $1 AND external_id = $2 FOR UPDATE`

const nextGenerationSQL = `
SELECT COALESCE(max(generation), 0) + 1 FROM job_runs
WHERE source = $1 AND external_id = $2 AND destination = $3`

// insertGenerationSQL records a forced replay's run before it is enqueued,
// as failed (retryable) with no attempts and its retry due now, so the
// claim takes it, the run is visible, and the reconciler enqueues it if
// the replay's own enqueue does not happen.
const insertGenerationSQL = `
INSERT INTO job_runs
    (key, source, external_id, destination, generation, status, attempts, calls, max_attempts,
     last_error, replayed_by, replay_reason, retry_at)
VALUES ($1, $2, $3, $4, $5, 'failed', 0, 0, $6, 'forced replay: waiting for a worker', $7, NULLIF($8, ''), now())
RETURNING ` + runColumns

// NewGeneration records a forced replay of an event to one destination:
// a new run with generation max(existing) + 1 (at least 2) and the key
// KeyFunc gives it. It returns ErrNotFound when the event does not exist,
// and ErrTooSlow past AdminStatementTimeout.
func (s *Store) NewGeneration(ctx context.Context, g NewGeneration) (Run, error) {
	var run Run
	err := s.adminTx(ctx, true, func(tx pgx.Tx) error {
		var one int
		if err := tx.QueryRow(ctx, lockEventSQL, g.Source, g.ExternalID).Scan(&one); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("event %s/%s: %w", g.Source, g.ExternalID, ErrNotFound)
			}
			return err
		}
		var gen int
		if err := tx.QueryRow(ctx, nextGenerationSQL, g.Source, g.ExternalID, g.Destination).Scan(&gen); err != nil {
			return err
		}
		gen = max(gen, 2)
		var err error
		run, err = scanRun(tx.QueryRow(ctx, insertGenerationSQL, g.KeyFunc(gen), g.Source, g.ExternalID,
			g.Destination, gen, max(g.MaxAttempts, 1), g.By, g.Reason))
		return err
	})
	if err != nil {
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrTooSlow) {
			return Run{}, err
		}
		return Run{}, fmt.Errorf("error recording forced replay: %w", err)
	}
	return run, nil
}
