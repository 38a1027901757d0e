package dedupe

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Run statuses, as stored in job_runs.status.
const (
	StatusRunning      = "running"
	StatusDone         = "done"
	StatusFailed       = "failed"
	StatusDead         = "dead"
	StatusSkippedStale = "skipped_stale"
	// StatusFiltered: a rule rejected the event at delivery time; settled.
	StatusFiltered = "filtered"
)

// DefaultLease is how long a claimed run may stay running before recovery
// presumes its worker dead, where the configuration says nothing
// (`lease`).
const DefaultLease = 2 * time.Minute

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
	// EventType is the event's type, or empty when unknown.
	EventType string
	// Headers is the JSON object of the request headers stored with the
	// event (the forwarded ones are picked from it).
	Headers []byte
	// ContentType is the Content-Type the sender used.
	ContentType string
	// Payload is the raw body.
	Payload []byte
	// OrderEntity and OrderVersion are the ordering inputs, or empty.
	OrderEntity, OrderVersion string
	// TraceParent is the W3C traceparent the event was received under
	// (Event.TraceParent), or empty.
	TraceParent string
	// ReceivedAt is when the event was first received (rules read it).
	ReceivedAt time.Time
}

// claimSQL claims many keys at once: each is created as running, or a
// retryable failed run, or a held run whose hold has passed, is taken back
// to running; any other existing row is reported unchanged. The claimed
// run itself records the call about to be made (calls, started_at, and
// held_until empty), so no delivery_attempts row is written until the
// call's outcome is (finishSQL), or the sweep finds the run's lease
// passed (sweepSQL): one row written per call instead of a row written
// and then rewritten. Rows are
// claimed in key order so concurrent batches never deadlock. The existing
// rows are read in the statement's snapshot: a row the upsert would have
// taken but did not was taken by a concurrent claim that committed while
// this one waited for it, so it is running elsewhere now; a row created
// after the snapshot shows as neither (also running elsewhere). A row
// under the key whose event, destination or generation differ from the
// input's is another run's: it is neither taken nor reported as this
// run (the last column says so). A claim that gives an event's last
// planned destination its run takes the event out of the outbox, so the
// reconciler's walk (OutboxPage) never reads an event its workers
// took in time and only the rest are settled by it (SettleEvents).
const claimSQL = `
WITH input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::int[], $7::bigint[])
        AS u(key, source, external_id, destination, generation, max_attempts, lease_ms)
), claimed AS (
    INSERT INTO job_runs AS r
        (key, source, external_id, destination, generation, status, calls, max_attempts, started_at, lease_until)
    SELECT key, source, external_id, destination, generation, 'running', 1, max_attempts, now(),
           now() + lease_ms * interval '1 millisecond'
    FROM input
    ORDER BY key
    ON CONFLICT (key) DO UPDATE
        SET status = 'running',
            calls = r.calls + 1,
            max_attempts = EXCLUDED.max_attempts,
            started_at = now(),
            completed_at = NULL,
            lease_until = EXCLUDED.lease_until,
            held_until = NULL,
            hold_reason = NULL,
            retry_at = NULL
        WHERE ((r.status = 'failed' AND NOT r.permanent)
               OR (r.status = 'running' AND r.held_until IS NOT NULL AND r.held_until <= now()))
          -- The row is this run only if it is this event's, destination's
          -- and generation's; another run's row is never taken.
          AND (r.source, r.external_id, r.destination, r.generation)
              = (EXCLUDED.source, EXCLUDED.external_id, EXCLUDED.destination, EXCLUDED.generation)
    RETURNING r.key, r.status, r.calls, r.attempts, r.lease_until, r.source, r.external_id, r.destination, r.generation
), complete AS MATERIALIZED (
    -- The outbox rows of events whose every planned destination has a
    -- first-generation run once this claim commits: a run created here
    -- (invisible to the statement's snapshot, hence read from claimed)
    -- or one that exists. Found by key in key order, as settleSQL does,
    -- so this and the reconciler's settle never deadlock. Runs claimed
    -- at once in two statements see neither the other: the row stays
    -- and the reconciler settles it.
    SELECT o.id
    FROM (SELECT DISTINCT source, external_id FROM claimed WHERE generation = 1 ORDER BY 1, 2) ev
    CROSS JOIN LATERAL (SELECT ctid AS id FROM event_outbox WHERE source = ev.source AND external_id = ev.external_id OFFSET 0) o
    CROSS JOIN LATERAL (SELECT plan FROM events WHERE source = ev.source AND external_id = ev.external_id OFFSET 0) e
    WHERE e.plan IS NOT NULL
      AND NOT EXISTS (
          SELECT 1 FROM unnest(e.plan) AS d(name)
          WHERE NOT EXISTS (SELECT 1 FROM claimed c WHERE c.source = ev.source AND c.external_id = ev.external_id
                                                     AND c.generation = 1 AND c.destination = d.name)
            AND NOT EXISTS (SELECT 1 FROM job_runs r WHERE r.source = ev.source AND r.external_id = ev.external_id
                                                       AND r.generation = 1 AND r.destination = d.name))
), settled AS (
    DELETE FROM event_outbox o USING complete c WHERE o.ctid = c.id
)
SELECT i.key,
       c.key IS NOT NULL,
       COALESCE(c.status, CASE WHEN cur.status = 'failed' AND NOT cur.permanent THEN 'running' ELSE cur.status END),
       COALESCE(c.calls, cur.calls, 0),
       COALESCE(c.attempts, cur.attempts, 0),
       cur.result,
       COALESCE(c.lease_until, cur.held_until, cur.lease_until),
       e.content_type, e.payload, COALESCE(e.order_entity, ''), COALESCE(e.order_version, ''),
       COALESCE(e.trace_parent, ''), COALESCE(e.event_type, ''), e.headers, e.received_at,
       (cur.source, cur.external_id, cur.destination, cur.generation)
           IS DISTINCT FROM (i.source, i.external_id, i.destination, i.generation)
FROM input i
LEFT JOIN claimed c ON c.key = i.key
-- Each row read by its key (LATERAL … OFFSET 0, as above): a join lets
-- a plan made while the tables were small hash the whole table on every
-- claim once they are not.
LEFT JOIN LATERAL (SELECT status, permanent, calls, attempts, result, held_until, lease_until,
                          source, external_id, destination, generation
                   FROM job_runs WHERE key = i.key AND c.key IS NULL OFFSET 0) cur ON true
LEFT JOIN LATERAL (SELECT content_type, payload, order_entity, order_version, trace_parent, event_type, headers, received_at
                   FROM events WHERE source = i.source AND external_id = i.external_id AND c.key IS NOT NULL
                   OFFSET 0) e ON true`

// ErrKeyConflict is returned by [Store.Claim] when the run stored under
// the key belongs to another event, destination or generation than the
// claim names: the key is not this run's, nothing was changed, and
// nothing may be called under it. Keys made by jobs.Key are distinct for
// distinct runs, so it means a row written under another key encoding
// (migration 0012 re-keyed those) or a bug; retrying does not help.
var ErrKeyConflict = errors.New("the key's run belongs to another event, destination or generation")

// claimResult is one key's claim, or its own error.
type claimResult struct {
	claim Claim
	err   error
}

// Claim claims req.Key in one atomic statement and reports the outcome.
// When the run is claimed but its event no longer exists (retention), the
// run is marked failed permanently and ErrNotFound is returned.
func (s *Store) Claim(ctx context.Context, req ClaimRequest) (Claim, error) {
	res, err := s.claimBatch(ctx, []ClaimRequest{req})
	if err != nil {
		return Claim{}, err
	}
	return res[0].claim, res[0].err
}

// claimBatch claims many keys in one statement. A key given twice is
// claimed once; its other copies are told it is running elsewhere.
func (s *Store) claimBatch(ctx context.Context, reqs []ClaimRequest) ([]claimResult, error) {
	n := len(reqs)
	index := make(map[string]int, n)
	var (
		keys, sources, ids, dests = make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
		gens, maxAttempts         = make([]int32, 0, n), make([]int32, 0, n)
		leases                    = make([]int64, 0, n)
	)
	for _, r := range reqs {
		if _, dup := index[r.Key]; dup {
			continue
		}
		index[r.Key] = len(keys)
		keys, sources, ids, dests = append(keys, r.Key), append(sources, r.Source), append(ids, r.ExternalID), append(dests, r.Destination)
		gens, maxAttempts = append(gens, int32(max(r.Generation, 1))), append(maxAttempts, int32(r.MaxAttempts))
		leases = append(leases, r.Lease.Milliseconds())
	}
	rows, err := s.pool.Query(ctx, claimSQL, keys, sources, ids, dests, gens, maxAttempts, leases)
	if err != nil {
		return nil, fmt.Errorf("error claiming key: %w", err)
	}
	perKey := make([]claimResult, len(keys))
	goneCall := make(map[int]int) // claimed keys whose event is gone: their call
	for rows.Next() {
		var (
			key     string
			c       Claim
			claimed bool
			status  *string
			result  []byte
			retryAt *time.Time
			ct      *string
			payload []byte
			entity  *string
			version *string
			tp      *string
			evType  *string
			headers []byte
			recvAt  *time.Time
			foreign bool
		)
		if err := rows.Scan(&key, &claimed, &status, &c.Call, &c.Attempts, &result, &retryAt,
			&ct, &payload, &entity, &version, &tp, &evType, &headers, &recvAt, &foreign); err != nil {
			rows.Close()
			return nil, fmt.Errorf("error reading claims: %w", err)
		}
		c.Result = result
		if retryAt != nil {
			c.RetryAt = *retryAt
		}
		if !claimed && status != nil && foreign {
			perKey[index[key]] = claimResult{err: fmt.Errorf("error claiming key %s: %w", key, ErrKeyConflict)}
			continue
		}
		switch {
		case status == nil:
			// Another transaction created the row after our snapshot.
			c = Claim{Outcome: RunningElsewhere, Status: StatusRunning}
		case claimed:
			c.Status = *status
			c.Outcome = Claimed
			if ct != nil {
				c.Event = StoredEvent{
					ContentType:  *ct,
					Payload:      payload,
					OrderEntity:  *entity,
					OrderVersion: *version,
					TraceParent:  *tp,
					EventType:    *evType,
					Headers:      headers,
					ReceivedAt:   *recvAt,
				}
			}
		default:
			c.Status = *status
			switch c.Status {
			case StatusDone:
				c.Outcome = AlreadyDone
			case StatusRunning:
				c.Outcome = RunningElsewhere
			default:
				c.Outcome = Ended
			}
		}
		perKey[index[key]] = claimResult{claim: c}
		if claimed && ct == nil {
			perKey[index[key]] = claimResult{err: fmt.Errorf("error claiming key: event %w", ErrNotFound)}
			goneCall[index[key]] = c.Call
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error claiming key: %w", err)
	}
	for i, call := range goneCall {
		if err := s.markEventGone(ctx, keys[i], call); err != nil {
			perKey[i].err = err
		}
	}

	out := make([]claimResult, n)
	first := make(map[string]bool, len(keys))
	for i, r := range reqs {
		if first[r.Key] {
			out[i] = claimResult{claim: Claim{Outcome: RunningElsewhere, Status: StatusRunning}}
			continue
		}
		first[r.Key] = true
		out[i] = perKey[index[r.Key]]
	}
	return out, nil
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
