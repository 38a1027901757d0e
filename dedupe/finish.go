package dedupe

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// ErrClaimLost is returned by [Store.Finish] when the run is no longer the
// one the caller claimed: its lease passed and the sweeper (or a replay)
// handed it on. The caller's outcome is not stored; its call is still
// completed in delivery_attempts.
var ErrClaimLost = errors.New("claim lost")

// Outcome names how a claimed call ended (or paused), as sent to SQL
// and stored in delivery_attempts.outcome. What each does to the run is
// written once, in finishSQL.
type Outcome string

const (
	// OutcomeDone stores the destination's 2xx result: the run is done.
	OutcomeDone Outcome = "done"
	// OutcomeRetry counts a failed attempt (408, 5xx, timeout, connection
	// error): the run goes failed with its retry due after Wait, or dead
	// once attempts reach max_attempts.
	OutcomeRetry Outcome = "retry"
	// OutcomePermanent fails the run for good (a 4xx other than 408/429):
	// only a replay reopens it.
	OutcomePermanent Outcome = "permanent"
	// OutcomeHold keeps the run for a try after Wait without counting an
	// attempt (429, 503 with Retry-After, an entity busy elsewhere).
	OutcomeHold Outcome = "hold"
	// OutcomeStale marks the run skipped_stale; the destination was not
	// called.
	OutcomeStale Outcome = "stale"
	// OutcomeFiltered marks the run filtered: the destination's `when`
	// rule rejected the event at delivery time; not called, settled.
	OutcomeFiltered Outcome = "filtered"
)

// valid reports whether o is one of the outcomes finishSQL knows.
func (o Outcome) valid() bool {
	switch o {
	case OutcomeDone, OutcomeRetry, OutcomePermanent, OutcomeHold, OutcomeStale, OutcomeFiltered:
		return true
	}
	return false
}

// Finish is how a claimed run ended.
type Finish struct {
	Outcome Outcome
	// Call is the call number the claim returned.
	Call int
	// Called is true when the destination was called; the call's
	// delivery_attempts row is then written with its outcome.
	Called bool
	// StatusCode is the destination's HTTP status, or 0 without an answer.
	StatusCode int
	// Result is the stored result (JSON) for OutcomeDone.
	Result []byte
	// Error describes the failure; never a secret or a payload.
	Error string
	// Duration is how long the call took.
	Duration time.Duration
	// Answer is what the destination answered, kept with the call.
	Answer Answer
	// SentBody is the start of the body sent when it was not the event's
	// own (a transform's), kept with the call; nil otherwise. The caller
	// bounds it.
	SentBody []byte
	// Wait is how long until the next try: the backoff of OutcomeRetry
	// (unless the run dies), the hold of OutcomeHold. It is stored as the
	// run's retry_at, which the reconciler watches.
	Wait time.Duration
	// Lease is added to Wait as a held run's lease.
	Lease time.Duration
	// HoldReason says why an OutcomeHold waits ("destination asked to
	// wait (HTTP 429)", "order"): the run is shown held with it.
	HoldReason string
}

// Answer is what a destination answered to one call, as kept in
// delivery_attempts (migration 0018). The caller bounds it.
type Answer struct {
	// Headers is a JSON object of the answer's headers of note; nil for
	// none.
	Headers []byte
	// Body is the start of the answer's body.
	Body []byte
	// Truncated is true when the body had more than Body.
	Truncated bool
}

// Finished is the run's state after [Store.Finish].
type Finished struct {
	// Status is the run's status now.
	Status string
	// Attempts counts the tries that count toward max_attempts.
	Attempts int
}

// finishSQL stores many outcomes at once, each conditional on the call
// its claim returned, and writes the delivery_attempts row of every call
// made that has none; a call that has one (logged as 'calling' by the
// ordering guard, or marked 'unknown' by a sweep that found the lease
// passed) is returned with its rows' ctids, which finishLoggedSQL then
// completes. It deletes a guard's 'calling' row for a call that was not
// made. It is the one place that says what an outcome does to a run.
// Each run is found by key and locked, in key order so concurrent
// batches never deadlock, and whether it is still the claimed call is
// read from the locked row: a condition on job_runs.status in the scan
// would let the planner walk the whole index of running runs, dead
// entries included, when statistics say few runs are running, and a join
// on the key lets it scan the whole table when its estimates are off.
// For the same reason every other row is found by its key in a LATERAL
// or scalar subquery (OFFSET 0 keeps a LATERAL one), and no statement
// here joins the batch with delivery_attempts to update it: a plan made
// while the table was small hashed all of it on every batch once it was
// not (TestDeliveryStatementsFindRowsByKey).
const finishSQL = `
WITH input AS (
    SELECT * FROM unnest($1::text[], $2::int[], $3::text[], $4::int[], $5::text[], $6::text[],
                         $7::float8[], $8::bigint[], $9::bool[], $10::bigint[], $11::text[], $12::bytea[], $13::bool[],
                         $14::text[], $15::bytea[])
        AS u(key, call, outcome, status_code, result, error, duration_ms, wait_ms, called, lease_ms,
             answer_headers, answer_body, answer_truncated, hold_reason, sent_body)
), answered AS (
    -- The call's answer, when its next try is due (after a hold, or
    -- after a failed attempt that leaves attempts: the same rule as
    -- retry_at below, on the run as it was), and the rows it has.
    SELECT i.*, CASE WHEN i.outcome = 'hold' OR (i.outcome = 'retry' AND r.attempts_left)
                     THEN now() + i.wait_ms * interval '1 millisecond' END AS next_try_at,
           ARRAY(SELECT ctid FROM delivery_attempts WHERE key = i.key AND call = i.call) AS logged
    FROM input i
    LEFT JOIN LATERAL (SELECT attempts + 1 < max_attempts AS attempts_left FROM job_runs
                       WHERE key = i.key AND i.outcome = 'retry' OFFSET 0) r ON true
    WHERE i.called
), unlogged AS (
    INSERT INTO delivery_attempts (key, call, status_code, succeeded, error, duration_ms, state, outcome,
                                   answer_headers, answer_body, answer_truncated, retry_at, sent_body)
    SELECT key, call, NULLIF(status_code, 0), outcome = 'done', NULLIF(error, ''), duration_ms, 'finished', outcome,
           NULLIF(answer_headers, '')::jsonb, answer_body, answer_truncated, next_try_at, sent_body
    FROM answered i
    WHERE cardinality(i.logged) = 0
), uncalled AS (
    -- A call logged as started that did not happen after all.
    DELETE FROM delivery_attempts a
    USING input i
    CROSS JOIN LATERAL (SELECT ctid AS id FROM delivery_attempts
                        WHERE key = i.key AND call = i.call AND state = 'calling' AND NOT i.called OFFSET 0) c
    WHERE a.ctid = c.id
), locked AS MATERIALIZED (
    SELECT i.*, r.calls AS current_call, r.status AS current_status
    FROM (SELECT * FROM input ORDER BY key) i
    CROSS JOIN LATERAL (SELECT calls, status FROM job_runs WHERE key = i.key FOR UPDATE) r
), updated AS (
    UPDATE job_runs r SET
        status = CASE l.outcome
            WHEN 'done' THEN 'done'
            WHEN 'retry' THEN CASE WHEN r.attempts + 1 >= r.max_attempts THEN 'dead' ELSE 'failed' END
            WHEN 'permanent' THEN 'failed'
            WHEN 'hold' THEN 'running'
            WHEN 'stale' THEN 'skipped_stale'
            WHEN 'filtered' THEN 'filtered' END,
        attempts = r.attempts + CASE WHEN l.outcome IN ('retry', 'permanent') THEN 1 ELSE 0 END,
        -- The claim counted the call it was about to make; one not made
        -- after all (a hold before calling, a rule, a stale version) is
        -- not a call: CALLS says how often the destination was called.
        calls = r.calls - CASE WHEN l.called THEN 0 ELSE 1 END,
        permanent = (l.outcome = 'permanent'),
        result = CASE WHEN l.outcome = 'done' THEN NULLIF(l.result, '')::jsonb ELSE r.result END,
        last_error = CASE WHEN l.outcome IN ('done', 'stale', 'filtered') THEN NULL ELSE NULLIF(l.error, '') END,
        retry_at = CASE WHEN l.outcome = 'hold' OR (l.outcome = 'retry' AND r.attempts + 1 < r.max_attempts)
                        THEN now() + l.wait_ms * interval '1 millisecond' END,
        held_until = CASE WHEN l.outcome = 'hold' THEN now() + l.wait_ms * interval '1 millisecond' END,
        hold_reason = CASE WHEN l.outcome = 'hold' THEN NULLIF(l.hold_reason, '') END,
        lease_until = CASE WHEN l.outcome = 'hold' THEN now() + (l.wait_ms + l.lease_ms) * interval '1 millisecond' END,
        completed_at = CASE WHEN l.outcome = 'hold' OR (l.outcome = 'retry' AND r.attempts + 1 < r.max_attempts)
                            THEN NULL ELSE now() END
    FROM locked l
    WHERE r.key = l.key AND l.current_call = l.call AND l.current_status = 'running'
    RETURNING r.key, r.status, r.attempts
)
SELECT i.key, u.status, u.attempts, a.logged, a.next_try_at
FROM input i
LEFT JOIN updated u ON u.key = i.key
LEFT JOIN answered a ON a.key = i.key AND cardinality(a.logged) > 0`

// finishLoggedSQL completes a logged row of a call finishSQL returned,
// with the call's answer as finishSQL stores it ($1–$9), found by the
// ctid finishSQL returned ($10) so it is always a single-row read.
const finishLoggedSQL = finishLoggedSetSQL + `WHERE ctid = $10`

// finishLoggedByKeySQL is finishLoggedSQL for a row a sweep marked
// 'unknown' between the two statements (its ctid changed): found by the
// call's key ($10) and number ($11).
const finishLoggedByKeySQL = finishLoggedSetSQL + `WHERE key = $10 AND call = $11 AND state <> 'finished'`

// finishLoggedSetSQL is what finishLoggedSQL writes.
const finishLoggedSetSQL = `
UPDATE delivery_attempts SET
    state = 'finished', outcome = $1, status_code = NULLIF($2, 0), succeeded = $1 = 'done',
    error = NULLIF($3, ''), duration_ms = $4, answer_headers = NULLIF($5, '')::jsonb, answer_body = $6,
    answer_truncated = $7, retry_at = $8, sent_body = $9
`

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

// Finish stores how the run claimed as call f.Call ended, and writes the
// call's delivery_attempts row when one was made. It returns ErrClaimLost if
// the run was handed on meanwhile.
func (s *Store) Finish(ctx context.Context, key string, f Finish) (Finished, error) {
	var res []finishResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) (err error) {
		res, err = finishBatch(ctx, tx, []finishRequest{{key: key, finish: f}})
		return err
	})
	if err != nil {
		return Finished{}, err
	}
	return res[0].finished, res[0].err
}

// finishBatch stores many outcomes in one statement (and one more per
// logged row of a call, finishLoggedSQL), in db's transaction. Keys must be
// distinct; finishRounds splits batches that are not.
func finishBatch(ctx context.Context, db DB, reqs []finishRequest) ([]finishResult, error) {
	n := len(reqs)
	var (
		keys      = make([]string, n)
		calls     = make([]int32, n)
		outcomes  = make([]string, n)
		codes     = make([]int32, n)
		results   = make([]string, n)
		errs      = make([]string, n)
		durations = make([]float64, n)
		waits     = make([]int64, n)
		called    = make([]bool, n)
		leases    = make([]int64, n)
		aHeaders  = make([]string, n)
		aBodies   = make([][]byte, n)
		aTrunc    = make([]bool, n)
		reasons   = make([]string, n)
		sent      = make([][]byte, n)
		index     = make(map[string]int, n)
	)
	for i, r := range reqs {
		f := r.finish
		if _, dup := index[r.key]; dup {
			return nil, fmt.Errorf("error finishing runs: key %s twice in one batch", r.key)
		}
		if !f.Outcome.valid() {
			return nil, fmt.Errorf("error finishing runs: unknown outcome %q", f.Outcome)
		}
		index[r.key] = i
		keys[i], calls[i], outcomes[i], codes[i] = r.key, int32(f.Call), string(f.Outcome), int32(f.StatusCode)
		results[i], errs[i] = string(f.Result), f.Error
		durations[i] = durationMs(f.Duration)
		waits[i], called[i], leases[i] = f.Wait.Milliseconds(), f.Called, f.Lease.Milliseconds()
		aHeaders[i], aBodies[i], aTrunc[i] = string(f.Answer.Headers), f.Answer.Body, f.Answer.Truncated
		reasons[i], sent[i] = f.HoldReason, f.SentBody
	}
	rows, err := db.Query(ctx, finishSQL, keys, calls, outcomes, codes, results, errs, durations, waits, called, leases,
		aHeaders, aBodies, aTrunc, reasons, sent)
	if err != nil {
		return nil, fmt.Errorf("error finishing run: %w", err)
	}
	out := make([]finishResult, n)
	var logged []loggedCall
	for rows.Next() {
		var (
			key      string
			status   *string
			attempts *int
			l        loggedCall
		)
		if err := rows.Scan(&key, &status, &attempts, &l.rows, &l.nextTry); err != nil {
			rows.Close()
			return nil, fmt.Errorf("error reading finished runs: %w", err)
		}
		i := index[key]
		if len(l.rows) > 0 {
			l.i = i
			logged = append(logged, l)
		}
		if status == nil {
			out[i] = finishResult{err: ErrClaimLost}
			continue
		}
		out[i] = finishResult{finished: Finished{Status: *status, Attempts: *attempts}}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error finishing run: %w", err)
	}
	for _, l := range logged {
		if err := completeLoggedCall(ctx, db, reqs[l.i], l); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// loggedCall is a call finishSQL left to finishLoggedSQL: reqs[i]'s, its
// logged rows and when its next try is due.
type loggedCall struct {
	i       int
	rows    []pgtype.TID
	nextTry *time.Time
}

// completeLoggedCall writes req's answer into the logged rows of its
// call, by ctid, or by key when a sweep changed them meanwhile.
func completeLoggedCall(ctx context.Context, db DB, req finishRequest, l loggedCall) error {
	f := req.finish
	answer := []any{string(f.Outcome), int32(f.StatusCode), f.Error, durationMs(f.Duration),
		string(f.Answer.Headers), f.Answer.Body, f.Answer.Truncated, l.nextTry, f.SentBody}
	completed := int64(0)
	for _, row := range l.rows {
		tag, err := db.Exec(ctx, finishLoggedSQL, slices.Concat(answer, []any{row})...)
		if err != nil {
			return fmt.Errorf("error completing the logged call of %s: %w", req.key, err)
		}
		completed += tag.RowsAffected()
	}
	if completed > 0 {
		return nil
	}
	if _, err := db.Exec(ctx, finishLoggedByKeySQL, slices.Concat(answer, []any{req.key, int32(f.Call)})...); err != nil {
		return fmt.Errorf("error completing the logged call of %s: %w", req.key, err)
	}
	return nil
}

// durationMs is a call's duration as delivery_attempts.duration_ms keeps it.
func durationMs(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}
