package dedupe

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Run statuses, as stored in job_runs.status.
const (
	StatusRunning      = "running"
	StatusDone         = "done"
	StatusFailed       = "failed"
	StatusDead         = "dead"
	StatusSkippedStale = "skipped_stale"
)

// ClaimRequest names the key to claim and how to create its run.
type ClaimRequest struct {
	// Key is the job key: <source>:<destination>:<external_id>[#generation].
	Key         string
	Source      string
	ExternalID  string
	Destination string
	// Generation is 1, or the forced replay's generation.
	Generation int
	// MaxAttempts is the destination's max_attempts.
	MaxAttempts int
	// Lease is how long the run may stay running before the sweeper
	// presumes its worker dead.
	Lease time.Duration
}

// ClaimOutcome says what a claim found.
type ClaimOutcome int

const (
	// Claimed means the caller now owns the run and may call the destination.
	Claimed ClaimOutcome = iota + 1
	// AlreadyDone means the run succeeded before; Claim.Result holds the
	// stored result. Nothing is to be called.
	AlreadyDone
	// RunningElsewhere means another worker holds the run (or the
	// destination asked to wait); retry later, at Claim.RetryAt or after.
	RunningElsewhere
	// Ended means the run ended without success (permanently failed,
	// dead or skipped as stale); only a replay reopens it.
	Ended
)

// String returns the outcome's name for logs.
func (o ClaimOutcome) String() string {
	switch o {
	case Claimed:
		return "claimed"
	case AlreadyDone:
		return "already_done"
	case RunningElsewhere:
		return "running_elsewhere"
	case Ended:
		return "ended"
	}
	return "unknown"
}

// Claim is the result of [Store.Claim].
type Claim struct {
	Outcome ClaimOutcome
	// Status is the run's status after the claim.
	Status string
	// Call numbers the destination calls for this key, counting every
	// call; the claim's own call when Claimed. Sent as Webhookd-Attempt.
	Call int
	// Attempts counts the tries that count toward max_attempts.
	Attempts int
	// Result is the stored result (JSON) of a done run.
	Result []byte
	// RetryAt is when a run held elsewhere may be free again.
	RetryAt time.Time
	// Event is the event to forward; set when Claimed.
	Event StoredEvent
}

// StoredEvent is the part of a recorded event that a worker forwards.
type StoredEvent struct {
	// ContentType is the Content-Type the sender used.
	ContentType string
	// Payload is the raw body.
	Payload []byte
	// OrderEntity and OrderVersion are the ordering inputs, or empty.
	OrderEntity, OrderVersion string
	// HeadersJSON is the stored request headers as a JSON object.
	HeadersJSON []byte
	// ReceivedAt is the first delivery's time.
	ReceivedAt time.Time
	// Deliveries counts deliveries of the event.
	Deliveries int
}

// claimSQL creates the run as running, or takes back a retryable failed
// run, or a held run whose hold has passed; otherwise it reports the
// existing row unchanged. A conflicting row committed after this
// statement's snapshot may make both halves return nothing; the caller
// treats that as running elsewhere.
const claimSQL = `
WITH claimed AS (
    INSERT INTO job_runs AS r
        (key, source, external_id, destination, generation, status, calls, max_attempts, started_at, lease_until)
    VALUES ($1, $2, $3, $4, $5, 'running', 1, $6, now(), now() + $7 * interval '1 millisecond')
    ON CONFLICT (key) DO UPDATE
        SET status = 'running',
            calls = r.calls + 1,
            max_attempts = EXCLUDED.max_attempts,
            started_at = now(),
            completed_at = NULL,
            lease_until = EXCLUDED.lease_until,
            held_until = NULL
        WHERE (r.status = 'failed' AND NOT r.permanent)
           OR (r.status = 'running' AND r.held_until IS NOT NULL AND r.held_until <= now())
    RETURNING true AS claimed, r.status, r.calls, r.attempts, r.result, r.lease_until
), current AS (
    -- Read in the statement's snapshot: a row the upsert would have taken
    -- but did not was taken by a concurrent claim that committed while
    -- this one waited for the row, so it is running elsewhere now.
    SELECT false AS claimed,
           CASE WHEN r.status = 'failed' AND NOT r.permanent THEN 'running' ELSE r.status END,
           r.calls, r.attempts, r.result,
           COALESCE(r.held_until, r.lease_until) AS retry_at
    FROM job_runs r
    WHERE r.key = $1 AND NOT EXISTS (SELECT 1 FROM claimed)
), outcome AS (
    SELECT * FROM claimed
    UNION ALL
    SELECT * FROM current
)
SELECT o.claimed, o.status, o.calls, o.attempts, o.result, o.lease_until,
       e.content_type, e.payload, COALESCE(e.order_entity, ''), COALESCE(e.order_version, ''),
       e.headers::text, e.received_at, e.deliveries
FROM outcome o
LEFT JOIN events e ON o.claimed AND e.source = $2 AND e.external_id = $3`

// Claim claims req.Key in one atomic statement and reports the outcome.
// When the run is claimed but its event no longer exists (retention), the
// run is marked failed permanently and ErrNotFound is returned.
func (s *Store) Claim(ctx context.Context, req ClaimRequest) (Claim, error) {
	var (
		c          Claim
		claimed    bool
		result     []byte
		retryAt    *time.Time
		ct         *string
		payload    []byte
		entity     *string
		version    *string
		headers    *string
		receivedAt *time.Time
		deliveries *int
	)
	err := s.pool.QueryRow(ctx, claimSQL, req.Key, req.Source, req.ExternalID, req.Destination,
		req.Generation, req.MaxAttempts, req.Lease.Milliseconds()).
		Scan(&claimed, &c.Status, &c.Call, &c.Attempts, &result, &retryAt,
			&ct, &payload, &entity, &version, &headers, &receivedAt, &deliveries)
	if errors.Is(err, pgx.ErrNoRows) {
		// Another transaction created the row after our snapshot.
		return Claim{Outcome: RunningElsewhere, Status: StatusRunning}, nil
	}
	if err != nil {
		return Claim{}, fmt.Errorf("error claiming key: %w", err)
	}
	c.Result = result
	if retryAt != nil {
		c.RetryAt = *retryAt
	}
	switch {
	case claimed:
		c.Outcome = Claimed
		if ct == nil {
			if err := s.markEventGone(ctx, req.Key, c.Call); err != nil {
				return Claim{}, err
			}
			return Claim{}, fmt.Errorf("error claiming key: event %w", ErrNotFound)
		}
		c.Event = StoredEvent{
			ContentType:  *ct,
			Payload:      payload,
			OrderEntity:  *entity,
			OrderVersion: *version,
			HeadersJSON:  []byte(*headers),
			ReceivedAt:   *receivedAt,
			Deliveries:   *deliveries,
		}
	case c.Status == StatusDone:
		c.Outcome = AlreadyDone
	case c.Status == StatusRunning:
		c.Outcome = RunningElsewhere
	default:
		c.Outcome = Ended
	}
	return c, nil
}

func (s *Store) markEventGone(ctx context.Context, key string, call int) error {
	_, err := s.pool.Exec(ctx, `
UPDATE job_runs SET status = 'failed', permanent = true, completed_at = now(), lease_until = NULL,
    last_error = 'event no longer stored'
WHERE key = $1 AND calls = $2 AND status = 'running'`, key, call)
	if err != nil {
		return fmt.Errorf("error failing run of a missing event: %w", err)
	}
	return nil
}
