package dedupe

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/webhookd/webhookd/internal/glob"
)

// ErrBadCursor is returned by [Store.ListEvents] when the filter's cursor
// was not produced by an earlier listing.
var ErrBadCursor = errors.New("invalid cursor")

// EventFilter selects events for the admin listing, counting and bulk
// replay. Zero fields do not filter.
type EventFilter struct {
	// Source keeps events of this source only.
	Source string
	// Sources, when not nil, keeps events of these sources only (none
	// when empty): the sources that have a destination the filter names.
	Sources []string
	// IDPrefix keeps events whose id starts with it (the whole id
	// included), case-sensitive; read through an index (migration 0019).
	IDPrefix string
	// InPayload makes IDPrefix also keep the events whose payload
	// contains it (its bytes, case-sensitive). No index holds that: the
	// events of the window (Since, Until) are read, so a caller sets it
	// only with a window it bounded.
	InPayload bool
	// Type keeps events whose type matches this glob as a whole: "*"
	// matches any run of characters, "/" and "." included.
	Type string
	// State keeps events in this state (state.go): received, queued,
	// running, retrying, held, done, failed, dead, skipped_stale or
	// recorded_only.
	State string
	// Status keeps events with a latest run (highest generation of its
	// destination) shown in this status (state.go); only RunDestination's
	// run when set.
	Status string
	// RunDestination narrows Status to this destination's runs.
	RunDestination string
	// Since keeps events first received at or after this time.
	Since time.Time
	// Until keeps events first received before this time.
	Until time.Time
	// View says which destinations' calls wait (paused, circuit open)
	// and which are configured: runs that would be queued or retrying
	// but wait on their destination are shown held.
	View DestinationView
	// Cursor continues a listing from a previous page ([EventPage.Next]
	// for older events, [EventPage.Prev] for newer ones). Empty starts
	// with the newest event.
	Cursor string
	// Limit caps the page. Defaults to 50; at most 1000.
	Limit int

	// prefixIDs, when not nil, are all the ids IDPrefix keeps
	// (withPrefixIDs).
	prefixIDs []string
}

// postFiltered reports whether f has conditions no index holds (state,
// type, run status): a page then examines a bounded stretch of events.
func (f EventFilter) postFiltered() bool {
	return f.State != "" || f.Type != "" || f.Status != ""
}

// EventSummary is one row of the admin listing.
type EventSummary struct {
	Source     string
	ExternalID string
	// EventType is the type the sender gave the event, or empty.
	EventType      string
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
	// Plan names the destinations that wanted the event when it was
	// recorded; nil for an event recorded before plans were kept (its
	// runs are its plan).
	Plan []string
	// State is the event's state (state.go).
	State string
	// RunStatuses lists the shown status of the latest run (highest
	// generation) of each destination, and queued for each destination
	// of its plan without a run; RunDestinations names their
	// destinations, in the same order (by name).
	RunStatuses     []string
	RunDestinations []string
}

// PlanKept reports whether the event's plan was kept when it was
// recorded (Plan may then be empty: no destination wanted it).
func (e EventSummary) PlanKept() bool { return e.Plan != nil }

// EventPage is one page of the admin listing, newest first.
type EventPage struct {
	Events []EventSummary
	// Next continues the listing with older events, after the page's
	// last one; empty on the last page.
	Next string
	// Prev continues the listing with newer events, before the page's
	// first one; empty on the first page (and after an empty page,
	// which the listing's start replaces).
	Prev string
}

// Admin listings read the newest events first through an index:
// events_received_at_idx, events_source_received_at_idx (migration 0014)
// when a source is given, or events_external_id_pattern_idx (migration
// 0019) for an id prefix. Each statement holds only the conditions its
// filter sets, so its plan is the index's whatever the filter (a
// catch-all condition, "source is $1 or $1 is empty", left the planner a
// scan), and runs under AdminStatementTimeout. An event's state, its
// runs' statuses and its type are in no index: with one of those filters
// a page examines at most scanBudget events, in index order, and ends
// early when those hold fewer matches than it wants, its cursor after the
// last event it examined; a count examines at most countCap events.
const (
	// maxScanBudget caps the events one post-filtered page examines.
	maxScanBudget = 20000
	// countCap is the most events [Store.CountEvents] examines.
	countCap = 10000
)

// scanBudget is how many events a page of limit events examines for a
// post filter: 20 per event wanted, at most maxScanBudget.
func scanBudget(limit int) int {
	return min(20*(limit+1), maxScanBudget)
}

// eventQuery builds one admin statement over events e and its arguments.
type eventQuery struct {
	args  []any
	where []string
	// view says which destinations wait, for states.
	view DestinationView
	// newer walks oldest first from the position (a page of newer
	// events); else newest first.
	newer bool
}

// keyset is a listing position: an event's (received_at, source,
// external_id).
type keyset struct {
	at                 time.Time
	source, externalID string
}

// position is where a page starts: after the keyset in newest-first
// order (older events), or, newer, after it in oldest-first order.
type position struct {
	keyset
	newer bool
}

func (q *eventQuery) arg(v any) string {
	q.args = append(q.args, v)
	return "$" + strconv.Itoa(len(q.args))
}

// newEventQuery starts a statement with the indexed conditions f sets,
// and the position after (nil: from the newest event).
func newEventQuery(f EventFilter, after *position) *eventQuery {
	q := &eventQuery{view: f.View}
	if f.Source != "" {
		q.where = append(q.where, "e.source = "+q.arg(f.Source))
	}
	if f.Sources != nil {
		q.where = append(q.where, "e.source = ANY("+q.arg(f.Sources)+"::text[])")
	}
	switch {
	case f.IDPrefix != "" && f.InPayload:
		q.where = append(q.where, "(e.external_id LIKE "+q.arg(likeEscape(f.IDPrefix)+"%")+
			" OR position("+q.arg([]byte(f.IDPrefix))+"::bytea IN e.payload) > 0)")
	case f.prefixIDs != nil:
		q.where = append(q.where, "e.external_id = ANY("+q.arg(f.prefixIDs)+"::text[])")
	case f.IDPrefix != "":
		// text_pattern_ops: a LIKE with a fixed prefix is an index range.
		q.where = append(q.where, "e.external_id LIKE "+q.arg(likeEscape(f.IDPrefix)+"%"))
	}
	if !f.Since.IsZero() {
		q.where = append(q.where, "e.received_at >= "+q.arg(f.Since))
	}
	if !f.Until.IsZero() {
		q.where = append(q.where, "e.received_at < "+q.arg(f.Until))
	}
	if after != nil {
		q.newer = after.newer
		at, src, id := q.arg(after.at), q.arg(after.source), q.arg(after.externalID)
		// The first is implied by the second; it is what bounds the
		// index range when a source is given.
		cmp := "<"
		if after.newer {
			cmp = ">"
		}
		q.where = append(q.where, "e.received_at "+cmp+"= "+at, "(e.received_at, e.source, e.external_id) "+cmp+" ("+at+", "+src+", "+id+")")
	}
	return q
}

// prefixIDsCap is the most ids an id prefix is looked up by: a prefix
// kept by more events is walked newest first, where it soon meets them.
const prefixIDsCap = 1000

// prefixIDsSQL reads the ids starting with a LIKE prefix ($1), at most $2,
// in the order of events_external_id_pattern_idx (operator ~<~), which
// makes reading that index's range and stopping the plan whatever the
// planner estimates the prefix keeps.
const prefixIDsSQL = `SELECT external_id FROM events WHERE external_id LIKE $1 ORDER BY external_id USING ~<~ LIMIT $2`

// withPrefixIDs returns f with the ids its IDPrefix keeps, when they are
// at most prefixIDsCap. A listing by prefix ordered newest first left the
// planner a choice on its estimate of how many events the prefix keeps:
// read the prefix's range of the id index and sort, or walk the time
// index and filter. A sampling that overestimated a rare prefix made it
// walk, reading every event of the table; looked up by id, the listing
// reads the prefix's events only.
func withPrefixIDs(ctx context.Context, tx pgx.Tx, f EventFilter) (EventFilter, error) {
	if f.IDPrefix == "" || f.InPayload {
		return f, nil
	}
	rows, err := tx.Query(ctx, prefixIDsSQL, likeEscape(f.IDPrefix)+"%", prefixIDsCap+1)
	if err != nil {
		return f, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return f, fmt.Errorf("error reading ids by prefix: %w", err)
	}
	if len(ids) <= prefixIDsCap {
		// Sorted: one id in several sources is looked up once.
		f.prefixIDs = append([]string{}, slices.Compact(ids)...)
	}
	return f, nil
}

// likeEscape escapes LIKE's wildcards (and its escape character) in s.
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// scanSQL selects cols of the events the conditions keep, in the walk's
// order, at most limit (an SQL expression) of them.
func (q *eventQuery) scanSQL(cols, limit string) string {
	where := ""
	if len(q.where) > 0 {
		where = "WHERE " + strings.Join(q.where, " AND ")
	}
	return `SELECT ` + cols + ` FROM events e ` + where + `
ORDER BY ` + q.order("e") + `
LIMIT ` + limit
}

// order is the walk's order over the table alias t: newest first, then
// by source and id; oldest first for a page of newer events.
func (q *eventQuery) order(t string) string {
	dir := " DESC"
	if q.newer {
		dir = " ASC"
	}
	return t + ".received_at" + dir + ", " + t + ".source" + dir + ", " + t + ".external_id" + dir
}

// summaryColumns are an EventSummary's columns of events, in scan order;
// the delivery count and last delivery include the repeats (repeats.go).
var summaryColumns = `e.source, e.external_id, COALESCE(e.event_type, '') AS event_type, e.received_at,
       ` + lastReceivedSQL("e.source", "e.external_id") + ` AS last_received_at,
       ` + deliveriesSQL("e.source", "e.external_id") + ` AS deliveries, e.content_type,
       length(e.payload) AS payload_bytes, e.recorded_only, e.plan`

// withStateSQL gives each row of the scan (the events of summaryColumns)
// its state and its runs' shown statuses (state.go): from the latest run
// (highest generation) of each destination, so a forced replay that
// succeeded makes the event done even though the run it replaced failed,
// and a queued one for each planned destination without a run.
func (q *eventQuery) withStateSQL(scan string) string {
	return `
WITH ` + q.viewCTEs() + `
SELECT e.*, st.handed_off, st.statuses, st.destinations,
       webhookd_event_state(st.handed_off, e.recorded_only, st.has_runs, st.statuses) AS state
FROM (` + scan + `) e
CROSS JOIN LATERAL (
    SELECT NOT ` + outboxHasSQL("e.source", "e.external_id") + ` AS handed_off,
           COALESCE(bool_or(sr.started), false) AS has_runs,
           COALESCE(array_agg(sr.shown ORDER BY sr.destination), '{}') AS statuses,
           COALESCE(array_agg(sr.destination ORDER BY sr.destination), '{}') AS destinations
    FROM (` + shownRunsSQL("e.source", "e.external_id", "e.plan", true) + `) sr) st`
}

// postConditions are f's conditions over a row x of withStateSQL that no
// index holds: state, type, and a latest run's status.
func (q *eventQuery) postConditions(f EventFilter) []string {
	var conds []string
	if f.State != "" {
		conds = append(conds, "x.state = "+q.arg(f.State))
	}
	if f.Type != "" {
		conds = append(conds, "x.event_type LIKE "+q.arg(glob.ToLike(f.Type)))
	}
	switch {
	case f.Status != "" && f.RunDestination != "":
		conds = append(conds, `EXISTS (SELECT 1 FROM unnest(x.destinations, x.statuses) AS u(d, s)
        WHERE u.d = `+q.arg(f.RunDestination)+` AND u.s = `+q.arg(f.Status)+`)`)
	case f.Status != "":
		conds = append(conds, q.arg(f.Status)+" = ANY(x.statuses)")
	}
	return conds
}

// listSQL is a page: the first limit events of the scan that f's post
// conditions keep, examining at most budget events.
func (q *eventQuery) listSQL(f EventFilter, budget, limit int) string {
	filter := ""
	if conds := q.postConditions(f); len(conds) > 0 {
		filter = "WHERE " + strings.Join(conds, " AND ")
	}
	return `SELECT * FROM (` + q.withStateSQL(q.scanSQL(summaryColumns, q.arg(budget))) + `) x ` + filter + `
ORDER BY ` + q.order("x") + `
LIMIT ` + q.arg(limit)
}

// countSQL counts the events examined (at most most of them, newest
// first) and those of them f's post conditions keep.
func (q *eventQuery) countSQL(f EventFilter, most int) string {
	if !f.postFiltered() {
		return `SELECT count(*), count(*) FROM (` + q.scanSQL("1", q.arg(most)) + `) e`
	}
	return `SELECT count(*), count(*) FILTER (WHERE ` + strings.Join(q.postConditions(f), " AND ") + `) FROM (` +
		q.withStateSQL(q.scanSQL(summaryColumns, q.arg(most))) + `) x`
}

// ListEvents returns one page of events matching f, newest first, with
// each event's state. With a post filter (state, type, run status), a
// page that examined its scan budget (20 events per event asked for, at
// most 20,000) ends there, possibly with fewer events than f.Limit (even
// none) and a cursor that continues after the last event examined. It
// returns ErrBadCursor for a cursor it did not produce, and ErrTooSlow
// past AdminStatementTimeout.
func (s *Store) ListEvents(ctx context.Context, f EventFilter) (EventPage, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 1000)
	var after *position
	if f.Cursor != "" {
		p, err := decodeCursor(f.Cursor)
		if err != nil {
			return EventPage{}, err
		}
		after = &p
	}
	budget := limit + 1
	if f.postFiltered() {
		budget = scanBudget(limit)
	}
	var page EventPage
	err := s.adminTx(ctx, false, func(tx pgx.Tx) error {
		page = EventPage{}
		f, err := withPrefixIDs(ctx, tx, f)
		if err != nil {
			return err
		}
		q := newEventQuery(f, after)
		rows, err := tx.Query(ctx, q.listSQL(f, budget, limit+1), q.args...)
		if err != nil {
			return err
		}
		events, err := pgx.CollectRows(rows, scanSummary)
		if err != nil {
			return err
		}
		// edge is where more events remain in the walk's direction.
		var edge *keyset
		if len(events) > limit {
			events = events[:limit]
			last := events[limit-1]
			edge = &keyset{last.ReceivedAt, last.Source, last.ExternalID}
		} else if f.postFiltered() {
			// Fewer matches than asked: the page ends where its scan
			// did, if events remain past it.
			q = newEventQuery(f, after)
			var last keyset
			err = tx.QueryRow(ctx, q.scanSQL("e.received_at, e.source, e.external_id", q.arg(1))+" OFFSET "+q.arg(budget-1), q.args...).
				Scan(&last.at, &last.source, &last.externalID)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			if err == nil {
				edge = &last
			}
		}
		newer := after != nil && after.newer
		if newer {
			slices.Reverse(events)
		}
		page.Events = events
		first, last := after, (*position)(nil)
		if n := len(events); n > 0 {
			first = &position{keyset: keyset{events[0].ReceivedAt, events[0].Source, events[0].ExternalID}, newer: true}
			last = &position{keyset: keyset{events[n-1].ReceivedAt, events[n-1].Source, events[n-1].ExternalID}}
		}
		switch {
		case newer:
			if edge != nil {
				page.Prev = encodeCursor(position{keyset: *edge, newer: true})
			}
			if last != nil {
				page.Next = encodeCursor(*last)
			}
		default:
			if edge != nil {
				page.Next = encodeCursor(position{keyset: *edge})
			}
			if after != nil && len(events) > 0 {
				page.Prev = encodeCursor(*first)
			}
		}
		return nil
	})
	if err != nil {
		return EventPage{}, fmt.Errorf("error listing events: %w", err)
	}
	return page, nil
}

func scanSummary(row pgx.CollectableRow) (EventSummary, error) {
	var e EventSummary
	err := row.Scan(&e.Source, &e.ExternalID, &e.EventType, &e.ReceivedAt, &e.LastReceivedAt, &e.Deliveries,
		&e.ContentType, &e.PayloadBytes, &e.RecordedOnly, &e.Plan, &e.HandedOff, &e.RunStatuses, &e.RunDestinations, &e.State)
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
		f, err := withPrefixIDs(ctx, tx, f)
		if err != nil {
			return err
		}
		q := newEventQuery(f, nil)
		return tx.QueryRow(ctx, q.countSQL(f, countCap), q.args...).Scan(&examined, &c.Matched)
	})
	if err != nil {
		return EventCount{}, fmt.Errorf("error counting events: %w", err)
	}
	c.Complete = examined < countCap
	return c, nil
}

// encodeCursor renders a listing position as an opaque URL-safe string.
func encodeCursor(p position) string {
	dir := "older"
	if p.newer {
		dir = "newer"
	}
	raw := dir + "\n" + p.at.UTC().Format(time.RFC3339Nano) + "\n" + p.source + "\n" + p.externalID
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

func decodeCursor(c string) (position, error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return position{}, ErrBadCursor
	}
	// Its source and id go to text columns: invalid UTF-8 or a NUL
	// would fail the statement.
	if !utf8.Valid(raw) || bytes.IndexByte(raw, 0) >= 0 {
		return position{}, ErrBadCursor
	}
	parts := strings.SplitN(string(raw), "\n", 4)
	if len(parts) != 4 || (parts[0] != "older" && parts[0] != "newer") {
		return position{}, ErrBadCursor
	}
	at, err := time.Parse(time.RFC3339Nano, parts[1])
	if err != nil {
		return position{}, ErrBadCursor
	}
	return position{keyset: keyset{at, parts[2], parts[3]}, newer: parts[0] == "newer"}, nil
}
