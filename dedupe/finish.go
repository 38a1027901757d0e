package dedupe

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrClaimLost is returned by [Store.Finish] when the run is no longer the
// one the caller claimed: its lease passed and the sweeper (or a replay)
// handed it on. The caller's outcome is not stored; its call is still
// logged in delivery_attempts.
var ErrClaimLost = errors.New("claim lost")

// FinishKind says how a claimed run ends (or pauses).
type FinishKind int

const (
	// FinishDone stores the destination's 2xx result.
	FinishDone FinishKind = iota + 1
	// FinishRetry counts a failed attempt (408, 5xx, timeout, connection
	// error); the run goes failed, or dead once attempts reach
	// max_attempts.
	FinishRetry
	// FinishPermanent fails the run for good (a 4xx other than 408/429).
	FinishPermanent
	// FinishHold keeps the run for a later retry without counting an
	// attempt (429, or 503 with Retry-After).
	FinishHold
	// FinishStale marks the run skipped_stale; the destination was not
	// called.
	FinishStale
)

// Finish is how a claimed run ended.
type Finish struct {
	Kind FinishKind
	// Call is the call number the claim returned.
	Call int
	// Called is true when the destination was called; the call is then
	// recorded in delivery_attempts.
	Called bool
	// StatusCode is the destination's HTTP status, or 0 without an answer.
	StatusCode int
	// Result is the stored result (JSON) for FinishDone.
	Result []byte
	// Error describes the failure; never a secret or a payload.
	Error string
	// Duration is how long the call took.
	Duration time.Duration
	// HoldFor is the hold's length for FinishHold.
	HoldFor time.Duration
	// Lease is added to HoldFor as the held run's lease.
	Lease time.Duration
}

// Finished is the run's state after [Store.Finish].
type Finished struct {
	// Status is the run's status now.
	Status string
	// Attempts counts the tries that count toward max_attempts.
	Attempts int
}

const finishSQL = `
WITH attempt AS (
    INSERT INTO delivery_attempts (key, call, status_code, succeeded, error, duration_ms)
    SELECT $1, $2, NULLIF($4::int, 0), $3 = 1, NULLIF($6, ''), $7
    WHERE $9
)
UPDATE job_runs r SET
    status = CASE $3::int
        WHEN 1 THEN 'done'
        WHEN 2 THEN CASE WHEN r.attempts + 1 >= r.max_attempts THEN 'dead' ELSE 'failed' END
        WHEN 3 THEN 'failed'
        WHEN 4 THEN 'running'
        ELSE 'skipped_stale' END,
    attempts = r.attempts + CASE WHEN $3::int IN (2, 3) THEN 1 ELSE 0 END,
    permanent = ($3::int = 3),
    result = CASE WHEN $3::int = 1 THEN $5::jsonb ELSE r.result END,
    last_error = CASE WHEN $3::int IN (1, 5) THEN NULL ELSE NULLIF($6, '') END,
    held_until = CASE WHEN $3::int = 4 THEN now() + $8 * interval '1 millisecond' END,
    lease_until = CASE WHEN $3::int = 4 THEN now() + ($8 + $10) * interval '1 millisecond' END,
    completed_at = CASE WHEN $3::int = 4 OR ($3::int = 2 AND r.attempts + 1 < r.max_attempts)
                        THEN NULL ELSE now() END
WHERE r.key = $1 AND r.calls = $2 AND r.status = 'running'
RETURNING r.status, r.attempts`

// Finish stores how the run claimed as call f.Call ended, and logs the
// call in delivery_attempts when one was made. It returns ErrClaimLost if
// the run was handed on meanwhile.
func (s *Store) Finish(ctx context.Context, key string, f Finish) (Finished, error) {
	var out Finished
	err := s.pool.QueryRow(ctx, finishSQL, key, f.Call, int(f.Kind), f.StatusCode, f.Result, f.Error,
		float64(f.Duration.Microseconds())/1000, f.HoldFor.Milliseconds(), f.Called, f.Lease.Milliseconds()).
		Scan(&out.Status, &out.Attempts)
	if errors.Is(err, pgx.ErrNoRows) {
		return Finished{}, ErrClaimLost
	}
	if err != nil {
		return Finished{}, fmt.Errorf("error finishing run: %w", err)
	}
	return out, nil
}
