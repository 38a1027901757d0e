package dedupe

import (
	"context"
	"errors"
	"fmt"
	"time"
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

// finishSQL stores many outcomes at once, each conditional on the call
// its claim returned, and logs every call made in delivery_attempts. Kinds
// are the FinishKind values. Each run is found by key and locked, in key
// order so concurrent batches never deadlock, and whether it is still the
// claimed call is read from the locked row: a condition on job_runs.status
// in the scan would let the planner walk the whole index of running runs,
// dead entries included, when statistics say few runs are running, and a
// join on the key lets it scan the whole table when its estimates are off.
const finishSQL = `
WITH input AS (
    SELECT * FROM unnest($1::text[], $2::int[], $3::int[], $4::int[], $5::text[], $6::text[],
                         $7::float8[], $8::bigint[], $9::bool[], $10::bigint[])
        AS u(key, call, kind, status_code, result, error, duration_ms, hold_ms, called, lease_ms)
), attempt AS (
    INSERT INTO delivery_attempts (key, call, status_code, succeeded, error, duration_ms)
    SELECT key, call, NULLIF(status_code, 0), kind = 1, NULLIF(error, ''), duration_ms
    FROM input WHERE called
), locked AS MATERIALIZED (
    SELECT i.*, r.calls AS current_call, r.status AS current_status
    FROM (SELECT * FROM input ORDER BY key) i
    CROSS JOIN LATERAL (SELECT calls, status FROM job_runs WHERE key = i.key FOR UPDATE) r
), updated AS (
    UPDATE job_runs r SET
        status = CASE l.kind
            WHEN 1 THEN 'done'
            WHEN 2 THEN CASE WHEN r.attempts + 1 >= r.max_attempts THEN 'dead' ELSE 'failed' END
            WHEN 3 THEN 'failed'
            WHEN 4 THEN 'running'
            ELSE 'skipped_stale' END,
        attempts = r.attempts + CASE WHEN l.kind IN (2, 3) THEN 1 ELSE 0 END,
        permanent = (l.kind = 3),
        result = CASE WHEN l.kind = 1 THEN NULLIF(l.result, '')::jsonb ELSE r.result END,
        last_error = CASE WHEN l.kind IN (1, 5) THEN NULL ELSE NULLIF(l.error, '') END,
        held_until = CASE WHEN l.kind = 4 THEN now() + l.hold_ms * interval '1 millisecond' END,
        lease_until = CASE WHEN l.kind = 4 THEN now() + (l.hold_ms + l.lease_ms) * interval '1 millisecond' END,
        completed_at = CASE WHEN l.kind = 4 OR (l.kind = 2 AND r.attempts + 1 < r.max_attempts)
                            THEN NULL ELSE now() END
    FROM locked l
    WHERE r.key = l.key AND l.current_call = l.call AND l.current_status = 'running'
    RETURNING r.key, r.status, r.attempts
)
SELECT i.key, u.status, u.attempts
FROM input i LEFT JOIN updated u ON u.key = i.key`

// finishRequest is one outcome to store.
type finishRequest struct {
	key    string
	finish Finish
}

// finishResult is one stored outcome, or ErrClaimLost.
type finishResult struct {
	finished Finished
	err      error
}

// Finish stores how the run claimed as call f.Call ended, and logs the
// call in delivery_attempts when one was made. It returns ErrClaimLost if
// the run was handed on meanwhile.
func (s *Store) Finish(ctx context.Context, key string, f Finish) (Finished, error) {
	res, err := finishBatch(ctx, s.pool, []finishRequest{{key: key, finish: f}})
	if err != nil {
		return Finished{}, err
	}
	return res[0].finished, res[0].err
}

// finishBatch stores many outcomes in one statement. Keys must be
// distinct; finishRounds splits batches that are not.
func finishBatch(ctx context.Context, db DB, reqs []finishRequest) ([]finishResult, error) {
	n := len(reqs)
	var (
		keys      = make([]string, n)
		calls     = make([]int32, n)
		kinds     = make([]int32, n)
		codes     = make([]int32, n)
		results   = make([]string, n)
		errs      = make([]string, n)
		durations = make([]float64, n)
		holds     = make([]int64, n)
		called    = make([]bool, n)
		leases    = make([]int64, n)
		index     = make(map[string]int, n)
	)
	for i, r := range reqs {
		f := r.finish
		if _, dup := index[r.key]; dup {
			return nil, fmt.Errorf("error finishing runs: key %s twice in one batch", r.key)
		}
		index[r.key] = i
		keys[i], calls[i], kinds[i], codes[i] = r.key, int32(f.Call), int32(f.Kind), int32(f.StatusCode)
		results[i], errs[i] = string(f.Result), f.Error
		durations[i] = float64(f.Duration.Microseconds()) / 1000
		holds[i], called[i], leases[i] = f.HoldFor.Milliseconds(), f.Called, f.Lease.Milliseconds()
	}
	rows, err := db.Query(ctx, finishSQL, keys, calls, kinds, codes, results, errs, durations, holds, called, leases)
	if err != nil {
		return nil, fmt.Errorf("error finishing run: %w", err)
	}
	out := make([]finishResult, n)
	for rows.Next() {
		var (
			key      string
			status   *string
			attempts *int
		)
		if err := rows.Scan(&key, &status, &attempts); err != nil {
			rows.Close()
			return nil, fmt.Errorf("error reading finished runs: %w", err)
		}
		i := index[key]
		if status == nil {
			out[i] = finishResult{err: ErrClaimLost}
			continue
		}
		out[i] = finishResult{finished: Finished{Status: *status, Attempts: *attempts}}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error finishing run: %w", err)
	}
	return out, nil
}
