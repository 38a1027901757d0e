package dedupe

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// DestinationHealth is one destination's finished calls over a window,
// read from the attempt log (delivery_attempts, by key prefix): what the
// destination answered, not what the runs became.
type DestinationHealth struct {
	// Since is the window's start; Step the width of each bucket.
	Since time.Time
	Step  time.Duration
	// Calls is how many calls finished in the window, Succeeded how many
	// of them the destination accepted.
	Calls, Succeeded int
	// P50 and P99 are the calls' durations, in milliseconds (0 with no
	// call).
	P50, P99 float64
	// Buckets are the window cut in Step wide pieces, oldest first.
	Buckets []HealthBucket
}

// HealthBucket is the calls that finished in one piece of a window.
type HealthBucket struct {
	Calls, Failed int
	// P50 and P99 are in milliseconds.
	P50, P99 float64
}

// SuccessRate is the share of calls accepted, 0..1 (1 with no call).
func (h DestinationHealth) SuccessRate() float64 {
	if h.Calls == 0 {
		return 1
	}
	return float64(h.Succeeded) / float64(h.Calls)
}

// CallError is one failed call in the attempt log.
type CallError struct {
	At                  time.Time
	Key                 string
	Source, ExternalID  string
	StatusCode          int
	Error               string
	DurationMillisecond float64
}

// AffectedEvent is an event whose run of a destination has not succeeded:
// stored failed or dead (shown failed, dead, retrying or queued, as the
// state rule says).
type AffectedEvent struct {
	Source, ExternalID string
	Key                string
	Status             string
	Attempts           int
	LastError          string
	UpdatedAt          time.Time
}

// healthSQL sums the finished calls whose key starts with $1 (one
// destination's: keys start with its escaped source and name) since $2,
// in $3-second buckets: one row per bucket that had a call, and the whole
// window as bucket -1. It reads the window through the created_at index;
// no run is read.
const healthSQL = `
SELECT coalesce(bucket, -1), count(*), count(*) FILTER (WHERE NOT succeeded),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms),
       percentile_cont(0.99) WITHIN GROUP (ORDER BY duration_ms)
FROM (SELECT floor(extract(epoch FROM a.created_at - $2::timestamptz) / $3::float8)::int AS bucket,
             a.succeeded, a.duration_ms
      FROM delivery_attempts a
      WHERE a.created_at >= $2 AND a.state = 'finished' AND starts_with(a.key, $1)) calls
GROUP BY GROUPING SETS ((bucket), ())`

// DestinationHealth returns the calls whose key starts with keyPrefix
// (one destination's; jobs.KeyPrefix) since since, in buckets of step.
// The window is the caller's bound: the statement reads the attempt log
// from since on (its created_at index), and returns ErrTooSlow past
// AdminStatementTimeout.
func (s *Store) DestinationHealth(ctx context.Context, keyPrefix string, since time.Time, step time.Duration) (DestinationHealth, error) {
	n := int(time.Since(since)/step) + 1
	h := DestinationHealth{Since: since, Step: step, Buckets: make([]HealthBucket, n)}
	err := s.adminTx(ctx, false, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, healthSQL, keyPrefix, since, step.Seconds())
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				i        int
				b        HealthBucket
				p50, p99 *float64
			)
			if err := rows.Scan(&i, &b.Calls, &b.Failed, &p50, &p99); err != nil {
				return err
			}
			if p50 != nil {
				b.P50, b.P99 = *p50, *p99
			}
			switch {
			case i < 0:
				h.Calls, h.Succeeded, h.P50, h.P99 = b.Calls, b.Calls-b.Failed, b.P50, b.P99
			case i < n:
				h.Buckets[i] = b
			}
		}
		return rows.Err()
	})
	if err != nil {
		return DestinationHealth{}, fmt.Errorf("error reading the calls of keys %s…: %w", keyPrefix, err)
	}
	return h, nil
}

// callErrorsSQL lists the failed calls whose key starts with $1 since
// $2, newest first, at most $3, each with its run's event.
const callErrorsSQL = `
SELECT a.created_at, a.key, r.source, r.external_id, coalesce(a.status_code, 0), coalesce(a.error, ''), a.duration_ms
FROM (SELECT created_at, key, status_code, error, duration_ms FROM delivery_attempts
      WHERE created_at >= $2 AND state = 'finished' AND NOT succeeded AND starts_with(key, $1)
      ORDER BY created_at DESC LIMIT $3) a
JOIN job_runs r ON r.key = a.key
ORDER BY a.created_at DESC`

// RecentCallErrors returns the newest failed calls whose key starts with
// keyPrefix (one destination's) since since, at most limit.
func (s *Store) RecentCallErrors(ctx context.Context, keyPrefix string, since time.Time, limit int) ([]CallError, error) {
	var out []CallError
	err := s.adminTx(ctx, false, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, callErrorsSQL, keyPrefix, since, limit)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (CallError, error) {
			var e CallError
			err := row.Scan(&e.At, &e.Key, &e.Source, &e.ExternalID, &e.StatusCode, &e.Error, &e.DurationMillisecond)
			return e, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("error reading the failed calls of keys %s…: %w", keyPrefix, err)
	}
	return out, nil
}

// affectedEventsSQL lists the runs whose key starts with $1 that had a
// failed call since $2 and are still failed or dead, newest first, at
// most $3: read from the attempt log's window (its created_at index) and
// each run by key, so it is bounded by the window, not by how many runs
// the destination ever had.
const affectedEventsSQL = `
SELECT r.source, r.external_id, r.key, webhookd_run_status(r.status, r.permanent, r.attempts, r.held_until), r.attempts,
       coalesce(r.last_error, ''), coalesce(r.completed_at, r.started_at, r.created_at)
FROM (SELECT DISTINCT key FROM delivery_attempts
      WHERE created_at >= $2 AND state = 'finished' AND NOT succeeded AND starts_with(key, $1)) f
JOIN job_runs r ON r.key = f.key
WHERE r.status IN ('failed', 'dead')
ORDER BY coalesce(r.completed_at, r.started_at, r.created_at) DESC LIMIT $3`

// AffectedEvents returns the runs whose key starts with keyPrefix (one
// destination's) that had a failed call since since and are still
// stored failed or dead (shown failed, dead, retrying or queued), newest
// first, at most limit.
func (s *Store) AffectedEvents(ctx context.Context, keyPrefix string, since time.Time, limit int) ([]AffectedEvent, error) {
	var out []AffectedEvent
	err := s.adminTx(ctx, false, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, affectedEventsSQL, keyPrefix, since, limit)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (AffectedEvent, error) {
			var e AffectedEvent
			err := row.Scan(&e.Source, &e.ExternalID, &e.Key, &e.Status, &e.Attempts, &e.LastError, &e.UpdatedAt)
			return e, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("error reading the affected events of keys %s…: %w", keyPrefix, err)
	}
	return out, nil
}
