package dedupe

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// EventDetail is everything stored about one event.
type EventDetail struct {
	EventSummary
	// Headers is the stored request headers as a JSON object.
	Headers []byte
	// Payload is the raw body.
	Payload []byte
	// OrderEntity and OrderVersion are the ordering inputs, or empty.
	OrderEntity, OrderVersion string
	// TraceParent is the W3C traceparent the event was recorded under
	// (tracing on), or empty: its trace holds every span of the event.
	TraceParent string
	// Runs lists every run of the event, by destination then generation.
	Runs []Run
	// Waiting are the destinations of its plan that have no run yet, each
	// shown queued, or held by its destination (with the reason).
	Waiting []Run
	// Attempts is the log of destination calls of those runs, oldest
	// first (at most the latest 500).
	Attempts []Attempt
}

// Run is one job_runs row.
type Run struct {
	Key         string
	Destination string
	Generation  int
	Status      string
	Attempts    int
	Calls       int
	MaxAttempts int
	Permanent   bool
	// Result is the stored result (JSON) of a done run, else nil.
	Result      []byte
	LastError   string
	CreatedAt   time.Time
	StartedAt   *time.Time
	CompletedAt *time.Time
	LeaseUntil  *time.Time
	HeldUntil   *time.Time
	// RetryAt is when the run's next try is due (retrying, queued
	// after a replay, held), or nil.
	RetryAt *time.Time
	// ReplayedBy and ReplayReason record who replayed the run and why.
	ReplayedBy   string
	ReplayReason string
	// Shown is the status the run is shown with (state.go): what will
	// happen next.
	Shown string
	// HoldReason says why a held run waits ("destination asked to wait
	// (HTTP 429)", "order", "paused", "circuit open"); HoldUntil is when
	// it goes on by itself (nil: until an operator resumes it).
	HoldReason string
	HoldUntil  *time.Time
	// SkippedAt, SkippedBy and SkipReason record an operator's skip of a
	// failed or dead run (Store.SkipRun): its entity's later events went
	// on past it. Nil and empty when it was not skipped.
	SkippedAt  *time.Time
	SkippedBy  string
	SkipReason string
}

// waiting returns the destinations of d's plan without a run (the rows
// shownRunsSQL counted queued), each queued or held by its destination.
func waiting(d EventDetail, view DestinationView) []Run {
	var out []Run
	for _, dest := range d.Plan {
		if slices.ContainsFunc(d.Runs, func(r Run) bool { return r.Destination == dest }) {
			continue
		}
		r := Run{Destination: dest, Shown: ShownQueued}
		r.hold(view, d.Source)
		out = append(out, r)
	}
	return out
}

// hold shows r held by its destination (HeldDestination, or not
// configured) when it would otherwise be queued or retrying: the rule
// shownRunsSQL's CASE applies to lists.
func (r *Run) hold(view DestinationView, source string) {
	if r.Shown != ShownQueued && r.Shown != ShownRetrying {
		return
	}
	if view.Configured != nil && !slices.Contains(view.Configured, Route{source, r.Destination}) {
		r.Shown, r.HoldReason, r.HoldUntil = ShownHeld, HoldNotConfigured, nil
		return
	}
	for _, h := range view.Held {
		if h.Source == source && h.Destination == r.Destination {
			r.Shown, r.HoldReason, r.HoldUntil = ShownHeld, h.Reason, nil
			if !h.Until.IsZero() {
				u := h.Until
				r.HoldUntil = &u
			}
			return
		}
	}
}

// Call states, as stored in delivery_attempts.state.
const (
	// CallCalling: the call is under way; its outcome is not stored yet.
	// Only the ordering guard writes such a row; an unordered call under
	// way is shown from its run (callsInFlight).
	CallCalling = "calling"
	// CallFinished: the call's outcome is stored.
	CallFinished = "finished"
	// CallUnknown: the worker stopped (or lost its lease) between logging
	// the call and storing its outcome: the destination may have acted on
	// it, so a later call with the same key may be a duplicate there.
	CallUnknown = "unknown"
)

// Attempt is one destination call (a delivery_attempts row).
type Attempt struct {
	Key        string
	Call       int
	StatusCode int
	Succeeded  bool
	Error      string
	Duration   time.Duration
	// CreatedAt is when the call started.
	CreatedAt time.Time
	// State is CallCalling, CallFinished or CallUnknown.
	State string
	// Outcome names how a finished call ended (done, retry, permanent,
	// hold); empty while calling, when unknown, and for calls logged
	// before outcomes were named.
	Outcome string
	// Answer is what the destination answered (headers of note, the
	// start of the body); empty without an answer and for calls logged
	// before answers were kept (migration 0018).
	Answer Answer
	// RetryAt is when the next try was due after this call (a hold, or a
	// failed attempt that left attempts), or nil.
	RetryAt *time.Time
	// SentBody is the start of the body sent when a transform made it
	// (migration 0031); nil when the event's own payload was sent.
	SentBody []byte
}

// Summary describes the call's outcome in a few words for people.
func (a Attempt) Summary() string {
	switch {
	case a.State == CallCalling:
		return "in flight"
	case a.State == CallUnknown:
		return "outcome unknown: the worker stopped mid-call (possible duplicate at the destination)"
	case a.Succeeded:
		return "ok"
	}
	return a.Error
}

const eventDetailSQL = `
SELECT e.headers::text, e.payload, COALESCE(e.order_entity, ''), COALESCE(e.order_version, ''),
       COALESCE(e.trace_parent, '')
FROM events e WHERE e.source = $1 AND e.external_id = $2`

const runColumns = `key, destination, generation, status, attempts, calls, max_attempts, permanent,
       result, COALESCE(last_error, ''), created_at, started_at, completed_at, lease_until, held_until, retry_at,
       COALESCE(replayed_by, ''), COALESCE(replay_reason, ''),
       webhookd_run_status(status, permanent, attempts, held_until), COALESCE(hold_reason, ''),
       skipped_at, COALESCE(skipped_by, ''), COALESCE(skip_reason, '')`

const eventRunsSQL = `
SELECT ` + runColumns + `
FROM job_runs WHERE source = $1 AND external_id = $2
ORDER BY destination, generation`

const eventAttemptsSQL = `
SELECT * FROM (
    SELECT key, call, COALESCE(status_code, 0), succeeded, COALESCE(error, ''), duration_ms, created_at,
           state, COALESCE(outcome, ''), answer_headers::text, answer_body, COALESCE(answer_truncated, false), retry_at, sent_body, id
    FROM delivery_attempts WHERE key = ANY($1::text[])
    ORDER BY id DESC LIMIT 500
) a ORDER BY id`

// GetEvent returns the event with its runs and attempt log, or
// ErrNotFound. view says which destinations' calls wait (paused,
// circuit open) and which are configured: the runs that wait on their
// destination are shown held, with the reason. It returns
// ErrTooSlow past AdminStatementTimeout.
func (s *Store) GetEvent(ctx context.Context, source, externalID string, view DestinationView) (EventDetail, error) {
	var d EventDetail
	err := s.adminTx(ctx, false, func(tx pgx.Tx) error {
		d = EventDetail{}
		var headers string
		err := tx.QueryRow(ctx, eventDetailSQL, source, externalID).Scan(&headers, &d.Payload, &d.OrderEntity, &d.OrderVersion, &d.TraceParent)
		if err != nil {
			return err
		}
		d.Headers = []byte(headers)
		q := newEventQuery(EventFilter{Source: source, View: view}, nil)
		q.where = append(q.where, "e.external_id = "+q.arg(externalID))
		rows, err := tx.Query(ctx, q.withStateSQL(q.scanSQL(summaryColumns, "1")), q.args...)
		if err != nil {
			return err
		}
		if d.EventSummary, err = pgx.CollectExactlyOneRow(rows, scanSummary); err != nil {
			return err
		}
		if d.Runs, err = runs(ctx, tx, source, externalID); err != nil {
			return err
		}
		for i := range d.Runs {
			d.Runs[i].hold(view, source)
		}
		d.Waiting = waiting(d, view)
		keys := make([]string, len(d.Runs))
		for i, r := range d.Runs {
			keys[i] = r.Key
		}
		rows, err = tx.Query(ctx, eventAttemptsSQL, keys)
		if err != nil {
			return err
		}
		d.Attempts, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Attempt, error) {
			var (
				a       Attempt
				ms      float64
				id      int64
				headers *string
			)
			err := row.Scan(&a.Key, &a.Call, &a.StatusCode, &a.Succeeded, &a.Error, &ms, &a.CreatedAt, &a.State, &a.Outcome,
				&headers, &a.Answer.Body, &a.Answer.Truncated, &a.RetryAt, &a.SentBody, &id)
			if headers != nil {
				a.Answer.Headers = []byte(*headers)
			}
			a.Duration = time.Duration(ms * float64(time.Millisecond))
			return a, err
		})
		d.Attempts = callsInFlight(d.Attempts, d.Runs, d.OrderEntity != "")
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return EventDetail{}, fmt.Errorf("event %s/%s: %w", source, externalID, ErrNotFound)
	}
	if err != nil {
		return EventDetail{}, fmt.Errorf("error reading event: %w", err)
	}
	return d, nil
}

// callsInFlight completes the attempt log read from delivery_attempts:
// a call under way has no row (its claim writes none, claimSQL), so each
// run in its claimed call (running, not held) whose call has no row gets
// one in flight, dated when the call started; an ordered event's call is
// logged by the ordering guard once it lets the call go, so it is not
// added. A row of unknown outcome is dropped for a call whose outcome was
// stored after all (a late answer racing the sweep, sweepSQL).
func callsInFlight(attempts []Attempt, runs []Run, ordered bool) []Attempt {
	type call struct {
		key string
		n   int
	}
	finished := make(map[call]bool, len(attempts))
	logged := make(map[call]bool, len(attempts))
	for _, a := range attempts {
		logged[call{a.Key, a.Call}] = true
		if a.State == CallFinished {
			finished[call{a.Key, a.Call}] = true
		}
	}
	out := attempts[:0]
	for _, a := range attempts {
		if a.State == CallUnknown && finished[call{a.Key, a.Call}] {
			continue
		}
		out = append(out, a)
	}
	for _, r := range runs {
		if ordered || r.Status != StatusRunning || r.HeldUntil != nil || r.Calls == 0 || logged[call{r.Key, r.Calls}] {
			continue
		}
		a := Attempt{Key: r.Key, Call: r.Calls, State: CallCalling}
		if r.StartedAt != nil {
			a.CreatedAt = *r.StartedAt
		}
		out = append(out, a)
	}
	return out
}

func runs(ctx context.Context, db DB, source, externalID string) ([]Run, error) {
	rows, err := db.Query(ctx, eventRunsSQL, source, externalID)
	if err != nil {
		return nil, fmt.Errorf("error reading runs: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Run, error) { return scanRun(row) })
}

func scanRun(row pgx.Row) (Run, error) {
	var r Run
	err := row.Scan(&r.Key, &r.Destination, &r.Generation, &r.Status, &r.Attempts, &r.Calls, &r.MaxAttempts,
		&r.Permanent, &r.Result, &r.LastError, &r.CreatedAt, &r.StartedAt, &r.CompletedAt, &r.LeaseUntil,
		&r.HeldUntil, &r.RetryAt, &r.ReplayedBy, &r.ReplayReason, &r.Shown, &r.HoldReason,
		&r.SkippedAt, &r.SkippedBy, &r.SkipReason)
	if err != nil {
		return Run{}, fmt.Errorf("error reading run: %w", err)
	}
	if r.Shown == ShownHeld {
		r.HoldUntil = r.HeldUntil
	}
	return r, nil
}

// eventContentSQL reads what an event's fields are read from, by its
// primary key.
const eventContentSQL = `SELECT headers, payload FROM events WHERE source = $1 AND external_id = $2`

// EventContent returns an event's stored headers (JSON) and payload, to
// read a field of it before its run is claimed (a destination's
// fair_by). It returns ErrNotFound when the event is not stored.
func (s *Store) EventContent(ctx context.Context, source, externalID string) (headers, payload []byte, err error) {
	err = s.pool.QueryRow(ctx, eventContentSQL, source, externalID).Scan(&headers, &payload)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, fmt.Errorf("event %s/%s: %w", source, externalID, ErrNotFound)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("error reading event content: %w", err)
	}
	return headers, payload, nil
}
