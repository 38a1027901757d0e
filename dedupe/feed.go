package dedupe

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhookd/webhookd/internal/glob"
)

// The event feed is every recorded event in a stable order, for readers
// that follow it from a cursor (GET /admin/events/stream, `webhookd
// listen`) and must never miss one.
//
// Why not an id assigned at insert: events are recorded by several
// gateway replicas, each with several group-commit statements in flight,
// so a transaction may take a position and commit after a later position
// was read; a reader already past it would never see it. Instead each
// event carries the id of the transaction that inserted it (feed_xid,
// pg_current_xact_id(), set by a column default) and a tie-break within
// that transaction (feed_seq), and the feed hands out only events whose
// transaction is older than the oldest one still running: the xmin of the
// reading statement's own snapshot (pg_snapshot_xmin). Every transaction
// that can still commit has an id at or above that line, so everything
// below it is final, and a cursor that moved past it never needs to look
// back. The cost on the ack path is two column defaults and one entry in
// a narrow index per new event (migration 0023; docs/performance.md).
//
// The price is that an event becomes readable only once every older
// writing transaction of the database cluster has ended: a transaction
// left open elsewhere (a long migration, a forgotten psql session) holds
// the feed back, and the feed then catches up at once.

// FeedCursor is a position in the event feed: a reader asks for the
// events after it.
type FeedCursor struct {
	// XID is the id of the transaction that inserted the event.
	XID uint64
	// Seq orders the events of one transaction (from 1); 0 stands before
	// all of them.
	Seq int64
}

// String returns the cursor as the API carries it: "<xid>.<seq>".
func (c FeedCursor) String() string {
	return strconv.FormatUint(c.XID, 10) + "." + strconv.FormatInt(c.Seq, 10)
}

// Less reports whether c comes before d in the feed.
func (c FeedCursor) Less(d FeedCursor) bool {
	return c.XID < d.XID || (c.XID == d.XID && c.Seq < d.Seq)
}

// ParseFeedCursor reads a cursor as FeedCursor.String writes it. It
// returns ErrBadCursor for anything else.
func ParseFeedCursor(s string) (FeedCursor, error) {
	x, q, ok := strings.Cut(s, ".")
	xid, err1 := strconv.ParseUint(x, 10, 64)
	seq, err2 := strconv.ParseInt(q, 10, 64)
	if !ok || err1 != nil || err2 != nil || seq < 0 || xid > 1<<63-1 {
		return FeedCursor{}, fmt.Errorf("%w: want <xid>.<seq> as an earlier answer gave it", ErrBadCursor)
	}
	return FeedCursor{XID: xid, Seq: seq}, nil
}

// FeedFilter narrows the feed. Zero fields do not filter.
type FeedFilter struct {
	// Source keeps one source's events.
	Source string
	// Type keeps events whose type matches this glob (internal/glob) as
	// a whole; an event without a type has the type "".
	Type string
}

// Defaults and bounds of a FeedRequest.
const (
	// DefaultFeedLimit is how many events a page holds when the request
	// does not say.
	DefaultFeedLimit = 100
	// MaxFeedLimit is the most events one page holds.
	MaxFeedLimit = 1000
	// DefaultFeedBytes is how many payload bytes a page holds when the
	// request does not say; a page holds at least one event, whatever
	// its size.
	DefaultFeedBytes = 4 << 20
	// feedScan is how many events one read examines: with a narrow
	// filter, a page ends there (possibly empty, with More set) so a
	// read stays bounded however far the next match is.
	feedScan = 2000
)

// FeedRequest asks for a page of the feed.
type FeedRequest struct {
	// After is where the page starts: the events after it.
	After FeedCursor
	// Filter narrows the events.
	Filter FeedFilter
	// Limit is the most events in the page. Defaults to
	// DefaultFeedLimit; at most MaxFeedLimit.
	Limit int
	// MaxBytes bounds the page's payload bytes. Defaults to
	// DefaultFeedBytes.
	MaxBytes int
}

// FeedEvent is an event as the feed hands it out.
type FeedEvent struct {
	// Cursor is the event's position: a reader that has handled it
	// continues after it.
	Cursor FeedCursor
	// Source and ExternalID identify the event.
	Source, ExternalID string
	// EventType is the event's type, or empty.
	EventType string
	// ContentType is the request's Content-Type.
	ContentType string
	// ReceivedAt is when the event was first recorded.
	ReceivedAt time.Time
	// Headers are the stored request headers (a JSON object of value
	// lists; see the gateway's stored headers policy).
	Headers []byte
	// Payload is the raw body.
	Payload []byte
}

// FeedPage is one page of the feed.
type FeedPage struct {
	// Events are in feed order.
	Events []FeedEvent
	// Next is where the next page starts: after the last event, or
	// further when the read examined events the filter did not keep, or
	// found nothing: the feed's final line, so a quiet reader's cursor
	// keeps up.
	Next FeedCursor
	// More is true when the page stopped at a bound (Limit, MaxBytes or
	// the read's examination budget): events may follow Next already.
	More bool
}

// feedScanSQL lists the events after a position ($1 xid, $2 seq) that
// are final: inserted by a transaction older than every transaction still
// running. The horizon is taken from the statement's own snapshot, so
// every event it lets through is visible to the same statement. One row
// with NULL event columns when there is none.
const feedScanSQL = `
WITH h AS (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS horizon)
SELECT h.horizon::text, s.xid, s.feed_seq, s.source, s.external_id, s.event_type, s.size
FROM h LEFT JOIN LATERAL (
    SELECT e.feed_xid::text AS xid, e.feed_seq, e.source, e.external_id,
           COALESCE(e.event_type, '') AS event_type, octet_length(e.payload) AS size
    FROM events e
    WHERE e.feed_xid IS NOT NULL
      AND (e.feed_xid, e.feed_seq) > ($1::text::xid8, $2::bigint)
      AND e.feed_xid < h.horizon
    ORDER BY e.feed_xid, e.feed_seq
    LIMIT $3
) s ON true`

// feedFetchSQL reads the picked events ($1 sources, $2 ids) whole, each
// found by key: a join would let a plan made while events was nearly
// empty hash the whole table against the batch (OFFSET 0 keeps the
// lookup from being flattened into one).
const feedFetchSQL = `
SELECT e.source, e.external_id, COALESCE(e.event_type, ''), e.content_type, e.received_at,
       e.headers::text, e.payload, e.feed_xid::text, e.feed_seq
FROM unnest($1::text[], $2::text[]) AS k(s, x)
CROSS JOIN LATERAL (SELECT * FROM events WHERE source = k.s AND external_id = k.x OFFSET 0) e`

// feedRow is one event feedScanSQL examined.
type feedRow struct {
	cursor                        FeedCursor
	source, externalID, eventType string
	size                          int
}

// ReadFeed returns the page of final events after r.After that
// r.Filter keeps: at once, possibly empty (the caller polls). It returns
// an error wrapping glob.ErrInvalid for a type filter that is not a glob,
// and ErrTooSlow past AdminStatementTimeout.
func (s *Store) ReadFeed(ctx context.Context, r FeedRequest) (FeedPage, error) {
	var typ glob.Pattern
	if r.Filter.Type != "" {
		var err error
		if typ, err = glob.Compile(r.Filter.Type); err != nil {
			return FeedPage{}, err
		}
	}
	limit := r.Limit
	if limit <= 0 {
		limit = DefaultFeedLimit
	}
	limit = min(limit, MaxFeedLimit)
	maxBytes := r.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultFeedBytes
	}
	keep := func(row feedRow) bool {
		return (r.Filter.Source == "" || row.source == r.Filter.Source) && (r.Filter.Type == "" || typ.Match(row.eventType))
	}
	var page FeedPage
	err := s.adminTx(ctx, false, func(tx pgx.Tx) error {
		horizon, scanned, err := scanFeed(ctx, tx, r.After)
		if err != nil {
			return err
		}
		page = FeedPage{Next: r.After}
		var picked []feedRow
		bytes := 0
		for _, row := range scanned {
			if !keep(row) {
				page.Next = row.cursor
				continue
			}
			if len(picked) == limit || (len(picked) > 0 && bytes+row.size > maxBytes) {
				page.More = true
				break
			}
			picked = append(picked, row)
			bytes += row.size
			page.Next = row.cursor
		}
		if !page.More {
			if len(scanned) == feedScan {
				page.More = true
			} else if end := (FeedCursor{XID: horizon}); page.Next.Less(end) {
				// Every event below the horizon was examined: the next
				// read starts there.
				page.Next = end
			}
		}
		page.Events, err = fetchFeed(ctx, tx, picked)
		return err
	})
	if err != nil {
		return FeedPage{}, fmt.Errorf("error reading the event feed: %w", err)
	}
	return page, nil
}

// scanFeed returns the horizon and up to feedScan final events after
// after, in feed order.
func scanFeed(ctx context.Context, tx pgx.Tx, after FeedCursor) (uint64, []feedRow, error) {
	rows, err := tx.Query(ctx, feedScanSQL, strconv.FormatUint(after.XID, 10), after.Seq, feedScan)
	if err != nil {
		return 0, nil, err
	}
	defer rows.Close()
	var (
		horizon uint64
		out     []feedRow
	)
	for rows.Next() {
		var (
			h, xid, source, id, typ *string
			seq                     *int64
			size                    *int
		)
		if err := rows.Scan(&h, &xid, &seq, &source, &id, &typ, &size); err != nil {
			return 0, nil, err
		}
		if horizon, err = strconv.ParseUint(*h, 10, 64); err != nil {
			return 0, nil, fmt.Errorf("horizon %q: %w", *h, err)
		}
		if xid == nil {
			continue // no event: the one row carries the horizon only
		}
		x, err := strconv.ParseUint(*xid, 10, 64)
		if err != nil {
			return 0, nil, fmt.Errorf("feed_xid %q: %w", *xid, err)
		}
		out = append(out, feedRow{cursor: FeedCursor{XID: x, Seq: *seq}, source: *source, externalID: *id, eventType: *typ, size: *size})
	}
	return horizon, out, rows.Err()
}

// fetchFeed reads the picked events whole, in their order. An event
// deleted since the scan (retention) is left out.
func fetchFeed(ctx context.Context, tx pgx.Tx, picked []feedRow) ([]FeedEvent, error) {
	if len(picked) == 0 {
		return nil, nil
	}
	sources, ids := make([]string, len(picked)), make([]string, len(picked))
	for i, p := range picked {
		sources[i], ids[i] = p.source, p.externalID
	}
	rows, err := tx.Query(ctx, feedFetchSQL, sources, ids)
	if err != nil {
		return nil, err
	}
	byKey := make(map[eventKey]FeedEvent, len(picked))
	for rows.Next() {
		var (
			ev      FeedEvent
			headers string
			xid     string
		)
		if err := rows.Scan(&ev.Source, &ev.ExternalID, &ev.EventType, &ev.ContentType, &ev.ReceivedAt,
			&headers, &ev.Payload, &xid, &ev.Cursor.Seq); err != nil {
			rows.Close()
			return nil, err
		}
		if ev.Cursor.XID, err = strconv.ParseUint(xid, 10, 64); err != nil {
			rows.Close()
			return nil, fmt.Errorf("feed_xid %q: %w", xid, err)
		}
		ev.Headers = []byte(headers)
		byKey[eventKey{ev.Source, ev.ExternalID}] = ev
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]FeedEvent, 0, len(picked))
	for _, p := range picked {
		if ev, ok := byKey[eventKey{p.source, p.externalID}]; ok {
			out = append(out, ev)
		}
	}
	return out, nil
}

// FeedHead returns the feed's final line now: a reader starting there
// gets every event whose transaction had not ended yet and every later
// one ("from now").
func (s *Store) FeedHead(ctx context.Context) (FeedCursor, error) {
	var h string
	if err := s.pool.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot())::text`).Scan(&h); err != nil {
		return FeedCursor{}, fmt.Errorf("error reading the event feed's head: %w", err)
	}
	x, err := strconv.ParseUint(h, 10, 64)
	if err != nil {
		return FeedCursor{}, fmt.Errorf("error reading the event feed's head %q: %w", h, err)
	}
	return FeedCursor{XID: x}, nil
}

// feedSinceSQL finds the first transaction of the events recorded at $1
// or later: the lowest feed_xid of the minute from $1 (received_at is a
// transaction's start, and its id comes with its first write, within its
// statement's timeout), else of the first event after it, else the head.
const feedSinceSQL = `
SELECT COALESCE(
    (SELECT min(feed_xid) FROM events
     WHERE received_at >= $1 AND received_at < $1 + interval '1 minute' AND feed_xid IS NOT NULL),
    (SELECT feed_xid FROM events WHERE received_at >= $1 AND feed_xid IS NOT NULL ORDER BY received_at LIMIT 1),
    pg_snapshot_xmin(pg_current_snapshot()))::text`

// FeedSince returns the cursor before the first event recorded at t or
// later (or the head, when none is). Events recorded in the same instant
// by other transactions may come with them.
func (s *Store) FeedSince(ctx context.Context, t time.Time) (FeedCursor, error) {
	var x string
	err := s.adminTx(ctx, false, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, feedSinceSQL, t).Scan(&x)
	})
	if err != nil {
		return FeedCursor{}, fmt.Errorf("error finding the event feed at %s: %w", t.Format(time.RFC3339), err)
	}
	xid, err := strconv.ParseUint(x, 10, 64)
	if err != nil {
		return FeedCursor{}, fmt.Errorf("error finding the event feed at %s: %q: %w", t.Format(time.RFC3339), x, err)
	}
	return FeedCursor{XID: xid}, nil
}

// feedBacklogSQL examines, in feed order, the recorded events after a
// position, up to $5 and one more, and counts those of the first $5 that
// a filter ($3 source, $4 LIKE pattern of the type) keeps, and all it
// examined.
const feedBacklogSQL = `
SELECT count(*) FILTER (WHERE n <= $5 AND ($3 = '' OR source = $3) AND ($4 = '' OR event_type LIKE $4)), count(*)
FROM (
    SELECT e.source, COALESCE(e.event_type, '') AS event_type, row_number() OVER (ORDER BY e.feed_xid, e.feed_seq) AS n
    FROM events e
    WHERE e.feed_xid IS NOT NULL AND (e.feed_xid, e.feed_seq) > ($1::text::xid8, $2::bigint)
    ORDER BY e.feed_xid, e.feed_seq
    LIMIT $5 + 1
) c`

// FeedBacklog counts the recorded events after c that f keeps among the
// next most events: how far behind a reader at c is. complete is false
// when more events follow those examined (the count is then a lower
// bound).
func (s *Store) FeedBacklog(ctx context.Context, c FeedCursor, f FeedFilter, most int) (n int, complete bool, err error) {
	like := ""
	if f.Type != "" {
		p, err := glob.Compile(f.Type)
		if err != nil {
			return 0, false, err
		}
		like = p.Like()
	}
	var examined int
	err = s.adminTx(ctx, false, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, feedBacklogSQL, strconv.FormatUint(c.XID, 10), c.Seq, f.Source, like, most).Scan(&n, &examined)
	})
	if err != nil {
		return 0, false, fmt.Errorf("error counting the event feed's backlog: %w", err)
	}
	if examined > most {
		// The extra event examined says only that there are more.
		return n, false, nil
	}
	return n, true, nil
}
