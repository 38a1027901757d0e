package dedupe

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// ErrBadCursor is returned by [Store.ListEvents] when the filter's cursor
// was not produced by an earlier listing.
var ErrBadCursor = errors.New("invalid cursor")

// EventFilter selects events for the admin listing, counting and bulk
// replay. Zero fields do not filter.
type EventFilter struct {
	// Source keeps events of this source only.
	Source string
	// State keeps events in this state (see webhookd_event_state): received,
	// queued, running, done, failed, dead or skipped_stale.
	State string
	// Since keeps events first received at or after this time.
	Since time.Time
	// Until keeps events first received before this time.
	Until time.Time
	// Destinations is the number of configured destinations per source,
	// needed to tell "queued" (some destination has no run yet) from the
	// rest. A source missing from the map counts one destination.
	Destinations map[string]int
	// Cursor continues a listing after the last event of a previous page
	// ([EventPage.Next]). Empty starts with the newest event.
	Cursor string
	// Limit caps the page. Defaults to 50; at most 1000.
	Limit int
}

// EventSummary is one row of the admin listing.
type EventSummary struct {
	Source         string
	ExternalID     string
	ReceivedAt     time.Time
	LastReceivedAt time.Time
	Deliveries     int
	ContentType    string
	// PayloadBytes is the size of the stored body.
	PayloadBytes int
	// HandedOff is true once every destination of the event has a run;
	// false while it is in the relay's outbox (recorded, some destination
	// not yet claimed by a worker).
	HandedOff bool
	// State is the event's state, from the latest run of each destination.
	State string
	// RunStatuses lists the status of the latest run (highest generation)
	// of each destination, by destination name.
	RunStatuses []string
}

// EventPage is one page of the admin listing, newest first.
type EventPage struct {
	Events []EventSummary
	// Next continues the listing after the page's last event; empty on the
	// last page.
	Next string
}

// eventStateSQL lists events with their state, from the latest run
// (highest generation) of each destination: a forced replay that
// succeeded makes the event done even though the run it replaced failed.
// $1 and $2 give the destination count per source.
var eventStateSQL = `
WITH dests AS (SELECT * FROM unnest($1::text[], $2::int[]) AS d(source, n))
SELECT e.source, e.external_id, e.received_at, e.last_received_at, e.deliveries, e.content_type,
       length(e.payload), st.handed_off, st.statuses,
       webhookd_event_state(st.handed_off, st.statuses,
                            COALESCE((SELECT d.n FROM dests d WHERE d.source = e.source), 1)) AS state
FROM events e
CROSS JOIN LATERAL (SELECT NOT ` + outboxHasSQL("e.source", "e.external_id") + ` AS handed_off,
                           ` + latestRunStatusesSQL("e.source", "e.external_id") + ` AS statuses) st
WHERE ($3::text = '' OR e.source = $3)
  AND ($4::timestamptz IS NULL OR e.received_at >= $4)
  AND ($5::timestamptz IS NULL OR e.received_at < $5)`

// listEventsSQL pages through eventStateSQL newest first; $7..$9 is the
// keyset cursor (received_at, source, external_id) of the previous page's
// last row.
var listEventsSQL = `
SELECT * FROM (` + eventStateSQL + `
  AND ($7::timestamptz IS NULL OR (e.received_at, e.source, e.external_id) < ($7, $8, $9))
) x
WHERE ($6::text = '' OR x.state = $6)
ORDER BY x.received_at DESC, x.source DESC, x.external_id DESC
LIMIT $10`

// countEventsSQL counts what eventStateSQL selects.
var countEventsSQL = `
SELECT count(*) FROM (` + eventStateSQL + `) x
WHERE ($6::text = '' OR x.state = $6)`

// filterArgs returns $1..$6 of eventStateSQL and the state filter.
func filterArgs(f EventFilter) []any {
	srcs := make([]string, 0, len(f.Destinations))
	counts := make([]int32, 0, len(f.Destinations))
	for s, n := range f.Destinations {
		srcs = append(srcs, s)
		counts = append(counts, int32(n))
	}
	return []any{srcs, counts, f.Source, nullTime(f.Since), nullTime(f.Until), f.State}
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// ListEvents returns one page of events matching f, newest first, with
// each event's state. It returns ErrBadCursor for a cursor it did not
// produce.
func (s *Store) ListEvents(ctx context.Context, f EventFilter) (EventPage, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 1000)
	var (
		curAt     *time.Time
		curSource string
		curExtID  string
		args      = filterArgs(f)
		page      EventPage
	)
	if f.Cursor != "" {
		at, src, id, err := decodeCursor(f.Cursor)
		if err != nil {
			return EventPage{}, err
		}
		curAt, curSource, curExtID = &at, src, id
	}
	args = append(args, curAt, curSource, curExtID, limit+1)
	rows, err := s.pool.Query(ctx, listEventsSQL, args...)
	if err != nil {
		return EventPage{}, fmt.Errorf("error listing events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var e EventSummary
		if err := rows.Scan(&e.Source, &e.ExternalID, &e.ReceivedAt, &e.LastReceivedAt, &e.Deliveries,
			&e.ContentType, &e.PayloadBytes, &e.HandedOff, &e.RunStatuses, &e.State); err != nil {
			return EventPage{}, fmt.Errorf("error reading events: %w", err)
		}
		page.Events = append(page.Events, e)
	}
	if err := rows.Err(); err != nil {
		return EventPage{}, fmt.Errorf("error listing events: %w", err)
	}
	if len(page.Events) > limit {
		page.Events = page.Events[:limit]
		last := page.Events[limit-1]
		page.Next = encodeCursor(last.ReceivedAt, last.Source, last.ExternalID)
	}
	return page, nil
}

// CountEvents returns how many events match f (its Cursor and Limit are
// ignored).
func (s *Store) CountEvents(ctx context.Context, f EventFilter) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, countEventsSQL, filterArgs(f)...).Scan(&n); err != nil {
		return 0, fmt.Errorf("error counting events: %w", err)
	}
	return n, nil
}

// encodeCursor renders a keyset position as an opaque URL-safe string.
func encodeCursor(at time.Time, source, externalID string) string {
	raw := at.UTC().Format(time.RFC3339Nano) + "\n" + source + "\n" + externalID
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

func decodeCursor(c string) (time.Time, string, string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return time.Time{}, "", "", ErrBadCursor
	}
	// Its source and id go to text columns: invalid UTF-8 or a NUL
	// would fail the statement.
	if !utf8.Valid(raw) || bytes.IndexByte(raw, 0) >= 0 {
		return time.Time{}, "", "", ErrBadCursor
	}
	parts := strings.SplitN(string(raw), "\n", 3)
	if len(parts) != 3 {
		return time.Time{}, "", "", ErrBadCursor
	}
	at, err := time.Parse(time.RFC3339Nano, parts[0])
	if err != nil {
		return time.Time{}, "", "", ErrBadCursor
	}
	return at, parts[1], parts[2], nil
}

// EventDetail is everything stored about one event.
type EventDetail struct {
	EventSummary
	// Headers is the stored request headers as a JSON object.
	Headers []byte
	// Payload is the raw body.
	Payload []byte
	// OrderEntity and OrderVersion are the ordering inputs, or empty.
	OrderEntity, OrderVersion string
	// Runs lists every run of the event, by destination then generation.
	Runs []Run
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
	// ReplayedBy and ReplayReason record who replayed the run and why.
	ReplayedBy   string
	ReplayReason string
}

// Call states, as stored in delivery_attempts.state.
const (
	// CallCalling: the call was logged before it was made; its outcome is
	// not stored yet.
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
SELECT e.headers::text, e.payload, COALESCE(e.order_entity, ''), COALESCE(e.order_version, '')
FROM events e WHERE e.source = $1 AND e.external_id = $2`

const runColumns = `key, destination, generation, status, attempts, calls, max_attempts, permanent,
       result, COALESCE(last_error, ''), created_at, started_at, completed_at, lease_until, held_until,
       COALESCE(replayed_by, ''), COALESCE(replay_reason, '')`

const eventRunsSQL = `
SELECT ` + runColumns + `
FROM job_runs WHERE source = $1 AND external_id = $2
ORDER BY destination, generation`

const eventAttemptsSQL = `
SELECT * FROM (
    SELECT key, call, COALESCE(status_code, 0), succeeded, COALESCE(error, ''), duration_ms, created_at,
           state, COALESCE(outcome, ''), id
    FROM delivery_attempts WHERE key = ANY($1::text[])
    ORDER BY id DESC LIMIT 500
) a ORDER BY id`

// GetEvent returns the event with its runs and attempt log, or
// ErrNotFound. destinations is the number of configured destinations of
// the event's source (for its state); 0 counts as 1.
func (s *Store) GetEvent(ctx context.Context, source, externalID string, destinations int) (EventDetail, error) {
	var d EventDetail
	var headers string
	err := s.pool.QueryRow(ctx, eventDetailSQL, source, externalID).
		Scan(&headers, &d.Payload, &d.OrderEntity, &d.OrderVersion)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return EventDetail{}, fmt.Errorf("event %s/%s: %w", source, externalID, ErrNotFound)
		}
		return EventDetail{}, fmt.Errorf("error reading event: %w", err)
	}
	d.Headers = []byte(headers)

	sum, err := s.eventSummary(ctx, source, externalID, destinations)
	if err != nil {
		return EventDetail{}, err
	}
	d.EventSummary = sum

	runs, err := s.runs(ctx, source, externalID)
	if err != nil {
		return EventDetail{}, err
	}
	d.Runs = runs
	keys := make([]string, len(runs))
	for i, r := range runs {
		keys[i] = r.Key
	}
	rows, err := s.pool.Query(ctx, eventAttemptsSQL, keys)
	if err != nil {
		return EventDetail{}, fmt.Errorf("error reading attempts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			a  Attempt
			ms float64
			id int64
		)
		if err := rows.Scan(&a.Key, &a.Call, &a.StatusCode, &a.Succeeded, &a.Error, &ms, &a.CreatedAt, &a.State, &a.Outcome, &id); err != nil {
			return EventDetail{}, fmt.Errorf("error reading attempts: %w", err)
		}
		a.Duration = time.Duration(ms * float64(time.Millisecond))
		d.Attempts = append(d.Attempts, a)
	}
	if err := rows.Err(); err != nil {
		return EventDetail{}, fmt.Errorf("error reading attempts: %w", err)
	}
	return d, nil
}

// eventSummarySQL is eventStateSQL for one event.
var eventSummarySQL = eventStateSQL + `
  AND e.external_id = $6`

func (s *Store) eventSummary(ctx context.Context, source, externalID string, destinations int) (EventSummary, error) {
	var e EventSummary
	err := s.pool.QueryRow(ctx, eventSummarySQL,
		[]string{source}, []int32{int32(max(destinations, 1))}, source, nil, nil, externalID).
		Scan(&e.Source, &e.ExternalID, &e.ReceivedAt, &e.LastReceivedAt, &e.Deliveries,
			&e.ContentType, &e.PayloadBytes, &e.HandedOff, &e.RunStatuses, &e.State)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return EventSummary{}, fmt.Errorf("event %s/%s: %w", source, externalID, ErrNotFound)
		}
		return EventSummary{}, fmt.Errorf("error reading event: %w", err)
	}
	return e, nil
}

func (s *Store) runs(ctx context.Context, source, externalID string) ([]Run, error) {
	rows, err := s.pool.Query(ctx, eventRunsSQL, source, externalID)
	if err != nil {
		return nil, fmt.Errorf("error reading runs: %w", err)
	}
	defer rows.Close()
	var runs []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error reading runs: %w", err)
	}
	return runs, nil
}

func scanRun(row pgx.Row) (Run, error) {
	var r Run
	err := row.Scan(&r.Key, &r.Destination, &r.Generation, &r.Status, &r.Attempts, &r.Calls, &r.MaxAttempts,
		&r.Permanent, &r.Result, &r.LastError, &r.CreatedAt, &r.StartedAt, &r.CompletedAt, &r.LeaseUntil,
		&r.HeldUntil, &r.ReplayedBy, &r.ReplayReason)
	if err != nil {
		return Run{}, fmt.Errorf("error reading run: %w", err)
	}
	return r, nil
}
