package dedupe

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
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
	// queued, running, done, failed, dead, skipped_stale or recorded_only.
	State string
	// Since keeps events first received at or after this time.
	Since time.Time
	// Until keeps events first received before this time.
	Until time.Time
	// Destinations is the number of configured destinations per source,
	// needed to tell "queued" (some destination has no run yet) from the
	// rest. A source missing from the map counts one destination.
	Destinations map[string]int
	// Filters are the destinations that filter their source's events by
	// type: an event's state does not count those that do not want it.
	Filters []DestinationFilter
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
	// RecordedOnly is true for an event imported as delivered elsewhere
	// (ImportOptions.RecordOnly): nothing forwards it unless replayed.
	RecordedOnly bool
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

// Admin listings read the newest events first through an index:
// events_received_at_idx, or events_source_received_at_idx (migration
// 0014) when a source is given. Each statement holds only the conditions
// its filter sets, so its plan is the index's whatever the filter (a
// catch-all condition, "source is $1 or $1 is empty", left the planner a
// scan), and runs under AdminStatementTimeout. An event's state comes from its runs
// (latestRunStatusesSQL), which no index holds: with a state filter a
// page examines at most scanBudget events, in index order, and ends early
// when those hold fewer matches than it wants, its cursor after the last
// event it examined; a count examines at most countCap events.
const (
	// maxScanBudget caps the events one state-filtered page examines.
	maxScanBudget = 20000
	// countCap is the most events [Store.CountEvents] examines.
	countCap = 10000
)

// scanBudget is how many events a page of limit events examines for a
// state filter: 20 per event wanted, at most maxScanBudget.
func scanBudget(limit int) int {
	return min(20*(limit+1), maxScanBudget)
}

// eventQuery builds one admin statement over events e and its arguments.
type eventQuery struct {
	args  []any
	where []string
	// dests is the number of destinations per source, for states, and
	// filters those that filter by type.
	dests   map[string]int
	filters []DestinationFilter
}

// keyset is a listing position: after (received_at, source, external_id)
// in newest-first order.
type keyset struct {
	at                 time.Time
	source, externalID string
}

func (q *eventQuery) arg(v any) string {
	q.args = append(q.args, v)
	return "$" + strconv.Itoa(len(q.args))
}

// newEventQuery starts a statement with the conditions f sets, and the
// position after (nil: from the newest event).
func newEventQuery(f EventFilter, after *keyset) *eventQuery {
	q := &eventQuery{dests: f.Destinations, filters: f.Filters}
	if f.Source != "" {
		q.where = append(q.where, "e.source = "+q.arg(f.Source))
	}
	if !f.Since.IsZero() {
		q.where = append(q.where, "e.received_at >= "+q.arg(f.Since))
	}
	if !f.Until.IsZero() {
		q.where = append(q.where, "e.received_at < "+q.arg(f.Until))
	}
	if after != nil {
		at, src, id := q.arg(after.at), q.arg(after.source), q.arg(after.externalID)
		// The first is implied by the second; it is what bounds the
		// index range when a source is given.
		q.where = append(q.where, "e.received_at <= "+at, "(e.received_at, e.source, e.external_id) < ("+at+", "+src+", "+id+")")
	}
	return q
}

// scanSQL selects cols of the events the conditions keep, newest first,
// at most limit (an SQL expression) of them.
func (q *eventQuery) scanSQL(cols, limit string) string {
	where := ""
	if len(q.where) > 0 {
		where = "WHERE " + strings.Join(q.where, " AND ")
	}
	return `SELECT ` + cols + ` FROM events e ` + where + `
ORDER BY ` + listOrder("e") + `
LIMIT ` + limit
}

// listOrder is the listing order over the table alias t: newest first, then
// by source and id.
func listOrder(t string) string {
	return t + ".received_at DESC, " + t + ".source DESC, " + t + ".external_id DESC"
}

// summaryColumns are an EventSummary's columns of events, in scan order.
const summaryColumns = `e.source, e.external_id, e.received_at, e.last_received_at, e.deliveries, e.content_type,
       length(e.payload) AS payload_bytes, e.recorded_only`

// withStateSQL gives each row of the scan (the events of summaryColumns)
// its state, from the latest run (highest generation) of each destination:
// a forced replay that succeeded makes the event done even though the run
// it replaced failed. A source missing from dests counts one destination.
func (q *eventQuery) withStateSQL(scan string) string {
	srcs := make([]string, 0, len(q.dests))
	counts := make([]int32, 0, len(q.dests))
	for s, n := range q.dests {
		srcs = append(srcs, s)
		counts = append(counts, int32(n))
	}
	filtersCTE, unwanted := "", ""
	if len(q.filters) > 0 {
		fs, fd, fp := filterRows(q.filters)
		filtersCTE = `, filters AS (SELECT * FROM unnest(` + q.arg(fs) + `::text[], ` + q.arg(fd) + `::text[], ` + q.arg(fp) + `::text[]) AS f(source, destination, pattern))`
		unwanted = " - " + unwantedSQL("e.source", "e.external_id")
	}
	return `
WITH dests AS (SELECT * FROM unnest(` + q.arg(srcs) + `::text[], ` + q.arg(counts) + `::int[]) AS d(source, n))` + filtersCTE + `
SELECT e.*, st.handed_off, st.statuses,
       webhookd_event_state(st.handed_off, e.recorded_only, st.statuses,
                            COALESCE((SELECT d.n FROM dests d WHERE d.source = e.source), 1)` + unwanted + `) AS state
FROM (` + scan + `) e
CROSS JOIN LATERAL (SELECT NOT ` + outboxHasSQL("e.source", "e.external_id") + ` AS handed_off,
                           ` + latestRunStatusesSQL("e.source", "e.external_id") + ` AS statuses) st`
}

// listSQL is a page: the first limit events of the scan in the state
// (any with ""), examining at most budget events.
func (q *eventQuery) listSQL(state string, budget, limit int) string {
	filter := ""
	if state != "" {
		filter = "WHERE x.state = " + q.arg(state)
	}
	return `SELECT * FROM (` + q.withStateSQL(q.scanSQL(summaryColumns, q.arg(budget))) + `) x ` + filter + `
ORDER BY ` + listOrder("x") + `
LIMIT ` + q.arg(limit)
}

// countSQL counts the events examined (at most most of them, newest
// first) and those of them in the state (all with "").
func (q *eventQuery) countSQL(state string, most int) string {
	if state == "" {
		return `SELECT count(*), count(*) FROM (` + q.scanSQL("1", q.arg(most)) + `) e`
	}
	return `SELECT count(*), count(*) FILTER (WHERE x.state = ` + q.arg(state) + `) FROM (` +
		q.withStateSQL(q.scanSQL(summaryColumns, q.arg(most))) + `) x`
}

// ListEvents returns one page of events matching f, newest first, with
// each event's state. With a state filter, a page that examined its scan
// budget (20 events per event asked for, at most 20,000) ends there,
// possibly with fewer events than f.Limit (even none) and a Next that
// continues after the last event examined. It returns ErrBadCursor for a
// cursor it did not produce, and ErrTooSlow past AdminStatementTimeout.
func (s *Store) ListEvents(ctx context.Context, f EventFilter) (EventPage, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 1000)
	var after *keyset
	if f.Cursor != "" {
		at, src, id, err := decodeCursor(f.Cursor)
		if err != nil {
			return EventPage{}, err
		}
		after = &keyset{at, src, id}
	}
	budget := limit + 1
	if f.State != "" {
		budget = scanBudget(limit)
	}
	var page EventPage
	err := s.adminTx(ctx, false, func(tx pgx.Tx) error {
		page = EventPage{}
		q := newEventQuery(f, after)
		rows, err := tx.Query(ctx, q.listSQL(f.State, budget, limit+1), q.args...)
		if err != nil {
			return err
		}
		page.Events, err = pgx.CollectRows(rows, scanSummary)
		if err != nil {
			return err
		}
		if len(page.Events) > limit {
			page.Events = page.Events[:limit]
			last := page.Events[limit-1]
			page.Next = encodeCursor(last.ReceivedAt, last.Source, last.ExternalID)
			return nil
		}
		if f.State == "" {
			return nil
		}
		// Fewer matches than asked: the page ends where its scan did, if
		// events remain past it.
		q = newEventQuery(f, after)
		var last keyset
		err = tx.QueryRow(ctx, q.scanSQL("e.received_at, e.source, e.external_id", q.arg(1))+" OFFSET "+q.arg(budget-1), q.args...).
			Scan(&last.at, &last.source, &last.externalID)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		page.Next = encodeCursor(last.at, last.source, last.externalID)
		return nil
	})
	if err != nil {
		return EventPage{}, fmt.Errorf("error listing events: %w", err)
	}
	return page, nil
}

func scanSummary(row pgx.CollectableRow) (EventSummary, error) {
	var e EventSummary
	err := row.Scan(&e.Source, &e.ExternalID, &e.ReceivedAt, &e.LastReceivedAt, &e.Deliveries,
		&e.ContentType, &e.PayloadBytes, &e.RecordedOnly, &e.HandedOff, &e.RunStatuses, &e.State)
	return e, err
}

// EventCount is what [Store.CountEvents] found.
type EventCount struct {
	// Matched counts the matching events among those examined.
	Matched int64
	// Complete is true when every event of the filter was examined, so
	// Matched is the count; false when the count stopped after 10,000
	// events: at least Matched match.
	Complete bool
}

// CountEvents counts the events matching f (its Cursor and Limit are
// ignored), examining at most 10,000 of them, newest first. It returns
// ErrTooSlow past AdminStatementTimeout.
func (s *Store) CountEvents(ctx context.Context, f EventFilter) (EventCount, error) {
	var (
		examined int64
		c        EventCount
	)
	err := s.adminTx(ctx, false, func(tx pgx.Tx) error {
		q := newEventQuery(f, nil)
		return tx.QueryRow(ctx, q.countSQL(f.State, countCap), q.args...).Scan(&examined, &c.Matched)
	})
	if err != nil {
		return EventCount{}, fmt.Errorf("error counting events: %w", err)
	}
	c.Complete = examined < countCap
	return c, nil
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
	// EventType is the event's type as its sender names it, or empty when
	// unknown.
	EventType string
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
	// Answer is what the destination answered (headers of note, the
	// start of the body); empty without an answer and for calls logged
	// before answers were kept (migration 0018).
	Answer Answer
	// RetryAt is when the next try was due after this call (a hold, or a
	// failed attempt that left attempts), or nil.
	RetryAt *time.Time
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
       COALESCE(e.event_type, '')
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
           state, COALESCE(outcome, ''), answer_headers::text, answer_body, COALESCE(answer_truncated, false), retry_at, id
    FROM delivery_attempts WHERE key = ANY($1::text[])
    ORDER BY id DESC LIMIT 500
) a ORDER BY id`

// GetEvent returns the event with its runs and attempt log, or
// ErrNotFound. destinations is the number of configured destinations of
// the event's source (for its state); 0 counts as 1. filters are the
// destinations that filter by type (EventFilter.Filters). It returns
// ErrTooSlow past AdminStatementTimeout.
func (s *Store) GetEvent(ctx context.Context, source, externalID string, destinations int, filters ...DestinationFilter) (EventDetail, error) {
	var d EventDetail
	err := s.adminTx(ctx, false, func(tx pgx.Tx) error {
		d = EventDetail{}
		var headers string
		err := tx.QueryRow(ctx, eventDetailSQL, source, externalID).Scan(&headers, &d.Payload, &d.OrderEntity, &d.OrderVersion, &d.EventType)
		if err != nil {
			return err
		}
		d.Headers = []byte(headers)
		q := newEventQuery(EventFilter{Source: source, Destinations: map[string]int{source: max(destinations, 1)}, Filters: filters}, nil)
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
				&headers, &a.Answer.Body, &a.Answer.Truncated, &a.RetryAt, &id)
			if headers != nil {
				a.Answer.Headers = []byte(*headers)
			}
			a.Duration = time.Duration(ms * float64(time.Millisecond))
			return a, err
		})
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
		&r.HeldUntil, &r.ReplayedBy, &r.ReplayReason)
	if err != nil {
		return Run{}, fmt.Errorf("error reading run: %w", err)
	}
	return r, nil
}
