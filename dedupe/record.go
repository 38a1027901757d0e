package dedupe

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"
)

// Event is one inbound webhook as the gateway received it.
type Event struct {
	// Source is the configured source name.
	Source string
	// ExternalID is the sender's event id.
	ExternalID string
	// EventType is the event's type as its sender names it; empty when
	// unknown (stored as NULL).
	EventType string
	// ContentType is the request's Content-Type, forwarded as is.
	ContentType string
	// Headers is a JSON object of the request headers worth keeping.
	Headers []byte
	// Payload is the raw body.
	Payload []byte
	// OrderEntity and OrderVersion are set when the source orders events
	// of one entity; both empty otherwise.
	OrderEntity, OrderVersion string
	// Plan names the destinations that want the event (jobs.Routes.Plan,
	// at recording): it gets a run for each, and its state is computed
	// over them (state.go). nil leaves it to the hand-off, which plans it
	// from the configuration it finds.
	Plan []string
	// ContentDigest, when set, is the digest of what the delivery's
	// signature covers (verify.SignedDigest). A delivery whose digest an
	// event of the source recorded under another id within that event's
	// ContentWindow is a copy of it: answered as its duplicate
	// (Recorded.CopyOf), and nothing is written. See signedcopies.go.
	ContentDigest []byte
	// ContentWindow is how long the digest marks later deliveries as
	// copies; required with ContentDigest.
	ContentWindow time.Duration
	// TraceParent is the W3C traceparent of the span that received the
	// event, stored with a new event so every later claim joins its
	// trace; empty when tracing is off.
	TraceParent string
}

// Recorded is what recording one delivery found.
type Recorded struct {
	// Inserted is true for the first delivery of the event.
	Inserted bool
	// Deliveries counts deliveries of the event, this one included.
	Deliveries int
	// Pending is true while the event's hand-off to the queue has not been
	// confirmed.
	Pending bool
	// RecordXID is the id (xid8) of the transaction that inserted the
	// event and RecordedWith how many events it inserted, both set only
	// when Inserted: the relay marks the transaction handed off once it
	// has enqueued all of them (EventRef).
	RecordXID    int64
	RecordedWith int
	// State is the event's state (see webhookd_event_state in the
	// migrations): "received" for a first delivery and for copies that
	// arrived with it.
	State string
	// CopyOf is set when the delivery carried the signed content of the
	// event CopyOf, recorded under that other id (Event.ContentDigest):
	// the delivery is a duplicate of it, Deliveries and State are that
	// event's, and nothing was written.
	CopyOf string
}

// digestKey names a signed content digest of a source.
type digestKey struct{ source, digest string }

type eventKey struct{ source, externalID string }

// eventColumns holds events column by column, the shape the unnest-based
// statements take.
type eventColumns struct {
	sources, externalIDs, eventTypes, contentTypes, headers, entities, versions []string
	payloads                                                                    [][]byte
	// copies counts each event's copies (RecordBatch).
	copies []int32
	// plans are the events' plans, comma-joined (destination names hold
	// no comma); nil for an event without one.
	plans []*string
	// digests and windows are the events' signed content digests (nil
	// when unset) and their windows in milliseconds; signed is true when
	// any is set.
	digests [][]byte
	windows []int64
	signed  bool
	// traceParents are the events' traceparents ("" for none).
	traceParents []string
}

func (c *eventColumns) add(ev *Event) {
	h := ev.Headers
	if len(h) == 0 {
		h = []byte("{}")
	}
	c.sources = append(c.sources, ev.Source)
	c.externalIDs = append(c.externalIDs, ev.ExternalID)
	c.eventTypes = append(c.eventTypes, ev.EventType)
	c.contentTypes = append(c.contentTypes, ev.ContentType)
	c.headers = append(c.headers, string(h))
	c.payloads = append(c.payloads, ev.Payload)
	c.entities = append(c.entities, ev.OrderEntity)
	c.versions = append(c.versions, ev.OrderVersion)
	c.copies = append(c.copies, 1)
	var plan *string
	if ev.Plan != nil {
		p := strings.Join(ev.Plan, ",")
		plan = &p
	}
	c.plans = append(c.plans, plan)
	c.digests = append(c.digests, ev.ContentDigest)
	c.windows = append(c.windows, ev.ContentWindow.Milliseconds())
	c.signed = c.signed || ev.ContentDigest != nil
	c.traceParents = append(c.traceParents, ev.TraceParent)
}

// args returns the columns as $1..$11 of eventsInputSQL.
func (c *eventColumns) args() []any {
	return []any{c.sources, c.externalIDs, c.copies, c.contentTypes, c.headers, c.payloads,
		c.entities, c.versions, c.plans, c.eventTypes, c.traceParents}
}

// eventsInputSQL is the input rows of the event statements (args). They insert
// them ORDER BY s, x: one lock order for every statement, so concurrent
// batches (and imports) never deadlock.
const eventsInputSQL = `
input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::text[], $6::bytea[],
                         $7::text[], $8::text[], $9::text[], $10::text[], $11::text[])
        AS u(s, x, d, ct, h, p, oe, ov, pl, t, tp)
)`

// recordSQL inserts many events at once and puts each new one in the
// relay's outbox, in the same statement. A repeat adds the number of
// copies in this statement to its row in event_repeats (repeats.go). It
// reports, per row, the delivery count, whether it was inserted, whether
// its hand-off is pending (a new event's is; a repeat's while its outbox
// row is there), the event's state (a new event has no runs to look up),
// whether the event was visible to the statement (see recordCTEsSQL),
// and, for a new event, the statement's transaction.
var recordSQL = `
WITH ` + eventsInputSQL + `, ` + recordCTEsSQL("input") + recordReportSQL("")

// recordCTEsSQL is the CTEs of recordSQL after its input: they record
// the rows of the CTE named from. A repeat never writes its event's row:
// known reads the events the statement's snapshot holds (one index
// probe per key, which is also where a repeat's base count comes from:
// a lateral lookup, OFFSET 0 keeping it from being flattened into a
// join that, with statistics taken when the table was small, reads the
// whole table for every batch), the
// insert tries only the others, and doing nothing on a conflict it
// leaves to Postgres who is first; the keys it did not insert are
// counted in event_repeats, after every insert (the sort waits for the
// anti-join, which reads all of inserted). Each statement thus takes its
// locks table by table, in key order, so concurrent statements do not
// deadlock. A key whose insert met a row committed after the statement's
// snapshot (a concurrent first delivery it waited for) is neither known
// nor inserted: it is reported with visible false and RecordBatch reads
// it again (repeatsOfUnseenSQL).
func recordCTEsSQL(from string) string {
	return `known AS (
    SELECT e.source, e.external_id, e.deliveries, e.recorded_only, e.plan
    FROM ` + from + ` f CROSS JOIN LATERAL (
        SELECT source, external_id, deliveries, recorded_only, plan FROM events
        WHERE source = f.s AND external_id = f.x OFFSET 0) e
), inserted AS (
    INSERT INTO events AS e
        (source, external_id, deliveries, content_type, headers, payload, order_entity, order_version, event_type, trace_parent, plan)
    SELECT s, x, d, ct, h::jsonb, p, NULLIF(oe, ''), NULLIF(ov, ''), NULLIF(t, ''), NULLIF(tp, ''), string_to_array(pl, ',')
    FROM ` + from + ` f
    WHERE NOT EXISTS (SELECT 1 FROM known k WHERE k.source = f.s AND k.external_id = f.x)
    ORDER BY s, x
    ON CONFLICT (source, external_id) DO NOTHING
    RETURNING e.source, e.external_id, e.deliveries
), ` + countRepeatsSQL(from, "inserted") + `, recorded AS (
    SELECT source, external_id, deliveries::bigint AS deliveries, true AS inserted, false AS recorded_only, true AS visible,
           NULL::text[] AS plan
    FROM inserted
    UNION ALL
    SELECT p.source, p.external_id, COALESCE(k.deliveries, 0) + p.repeats, false, COALESCE(k.recorded_only, false), k.source IS NOT NULL,
           k.plan
    FROM repeated p LEFT JOIN known k ON k.source = p.source AND k.external_id = p.external_id
), queued AS (` + outboxInsertSQL + `
), checked AS (
    SELECT r.*, CASE WHEN r.inserted THEN true ELSE ` + outboxHasSQL("r.source", "r.external_id") + ` END AS pending
    FROM recorded r
)`
}

// recordReportSQL is recordSQL's SELECT: one row per recorded event,
// with the columns in extra (", expr…") last.
func recordReportSQL(extra string) string {
	return `
SELECT r.source, r.external_id, r.deliveries, r.inserted, r.pending,
       -- A new event has no runs: its state (webhookd_event_state) is
       -- queued when planned for a destination, done when planned for
       -- none, received without a plan; written out, so the hot path
       -- looks nothing up for a new event.
       CASE WHEN NOT r.inserted THEN ` + repeatStateSQL("r") + `
            WHEN i.pl IS NULL THEN 'received' WHEN i.pl = '' THEN 'done' ELSE 'queued' END,
       r.visible, CASE WHEN r.inserted THEN pg_current_xact_id()::text::bigint ELSE 0 END` + extra + `
FROM checked r JOIN input i ON i.s = r.source AND i.x = r.external_id`
}

// repeatStateSQL is the state of the repeated event t (a row with
// source, external_id, plan, pending and recorded_only), as a sender's
// repeat is answered with it: without the destinations' holds, which
// only the admin surface knows.
func repeatStateSQL(t string) string {
	return eventStateSQL(t+".source", t+".external_id", t+".plan", t+".recorded_only", "NOT "+t+".pending")
}

// RecordBatch records events in one statement and returns one result per
// event, in order. Copies of one event within the batch are answered as if
// they had arrived one after the other: the first may be the insert, the
// rest are repeats with increasing delivery counts. An event carrying
// the signed content (Event.ContentDigest) of another event of the batch
// or of one recorded earlier is answered as that event's copy (CopyOf).
func RecordBatch(ctx context.Context, db DB, events []Event) ([]Recorded, error) {
	n := len(events)
	index := make(map[eventKey]int, n)
	slot := make([]int, n) // distinct key index of each event
	// copyOf marks the events whose signed content an earlier event of the
	// batch, under another id, carries: they are that slot's copies.
	var (
		copyOf  = make([]bool, n)
		digests map[digestKey]int
		cols    eventColumns
	)
	for i := range events {
		ev := &events[i]
		k := eventKey{ev.Source, ev.ExternalID}
		if u, ok := index[k]; ok {
			slot[i] = u
			cols.copies[u]++
			continue
		}
		dk := digestKey{ev.Source, string(ev.ContentDigest)}
		if ev.ContentDigest != nil {
			if u, ok := digests[dk]; ok {
				slot[i], copyOf[i] = u, true
				continue
			}
		}
		u := len(cols.sources)
		index[k] = u
		slot[i] = u
		if ev.ContentDigest != nil {
			if digests == nil {
				digests = make(map[digestKey]int)
			}
			digests[dk] = u
		}
		cols.add(ev)
	}

	sql, args := recordSQL, cols.args()
	if cols.signed {
		sql, args = recordSignedSQL, append(args, cols.digests, cols.windows)
	}
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("error recording events: %w", err)
	}
	perKey := make([]Recorded, len(cols.sources))
	seen := 0
	var unseen []int   // keys whose event the statement could not see
	var inserted []int // keys the statement inserted
	for rows.Next() {
		var (
			k   eventKey
			rec Recorded
		)
		var visible bool
		dest := []any{&k.source, &k.externalID, &rec.Deliveries, &rec.Inserted, &rec.Pending, &rec.State, &visible, &rec.RecordXID}
		if cols.signed {
			dest = append(dest, &rec.CopyOf)
		}
		if err := rows.Scan(dest...); err != nil {
			rows.Close()
			return nil, fmt.Errorf("error reading recorded events: %w", err)
		}
		u, ok := index[k]
		if !ok {
			rows.Close()
			return nil, fmt.Errorf("error recording events: unexpected row %s/%s", k.source, k.externalID)
		}
		perKey[u] = rec
		if !visible {
			unseen = append(unseen, u)
		}
		if rec.Inserted {
			inserted = append(inserted, u)
		}
		seen++
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error recording events: %w", err)
	}
	for _, u := range inserted {
		perKey[u].RecordedWith = len(inserted)
	}
	if seen != len(perKey) {
		return nil, fmt.Errorf("error recording events: %d rows returned for %d events", seen, len(perKey))
	}
	if len(unseen) > 0 {
		if err := reportUnseenRepeats(ctx, db, &cols, unseen, perKey); err != nil {
			return nil, err
		}
	}

	// Spread each key's result over its copies, in arrival order.
	results := make([]Recorded, n)
	nth := make([]int, len(perKey))
	for i := range events {
		u := slot[i]
		rec := perKey[u]
		if copyOf[i] || rec.CopyOf != "" {
			// Nothing was written for it: it reports the event it copies.
			results[i] = Recorded{Deliveries: rec.Deliveries, State: rec.State, CopyOf: cmp.Or(rec.CopyOf, cols.externalIDs[u])}
			continue
		}
		j := nth[u]
		nth[u]++
		first := rec.Deliveries - int(cols.copies[u]) + 1 // delivery number of the first copy
		r := rec
		r.Deliveries = first + j
		r.Inserted = rec.Inserted && j == 0
		if !r.Inserted {
			r.RecordXID, r.RecordedWith = 0, 0
		}
		results[i] = r
	}
	return results, nil
}
