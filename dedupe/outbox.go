package dedupe

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The relay's outbox (table event_outbox) holds one narrow row per event
// until every destination of the event has a run: the statement that
// records an event inserts its row (recordSQL), and the claim that creates
// the event's last run deletes it (claimSQL), or [Store.SettleEvents] does
// once the reconciler finds the runs exist. While the row is there, nothing but
// Postgres vouches for the event's tasks: the reconciler reads the
// outbox ([Store.OutboxPage], then [Store.UnsettledEvents] for the events
// whose tasks Redis does not hold as expected) and writes the task of every
// destination without a run that Redis does not hold. All SQL on the
// table is in this file, except the claim's delete and retention's delete
// of the rows of events it deletes (retainEventsSQL).

// EventRef names an event, with what its hand-off needs to know.
type EventRef struct {
	Source     string
	ExternalID string
	// EventType is the event's type when the caller knows it ("" when
	// unknown).
	EventType string
	// Plan names the destinations the event gets a run for (Event.Plan);
	// nil when it was recorded without one, and the hand-off plans it
	// from its type ([Store.SetPlans] keeps that plan).
	Plan []string
	// RecordXID and RecordedWith are the transaction that inserted the
	// event and how many events it inserted (Recorded.RecordXID), or 0
	// when the caller does not know them: the relay marks a transaction
	// handed off ([Store.MarkHandedOff]) once it has enqueued all its
	// events.
	RecordXID    int64
	RecordedWith int
}

// outboxInsertSQL is the part of recordSQL that puts each new event of
// the CTE "recorded" in the outbox.
const outboxInsertSQL = `
    INSERT INTO event_outbox (source, external_id)
    SELECT source, external_id FROM recorded WHERE inserted ORDER BY source, external_id`

// outboxHasSQL is an expression that is true while the event (source,
// externalID, two SQL expressions) has a row in the outbox: some of its
// destinations have no run yet.
func outboxHasSQL(source, externalID string) string {
	return `EXISTS (SELECT 1 FROM event_outbox o WHERE o.source = ` + source + ` AND o.external_id = ` + externalID + `)`
}

// UnsettledEvent is an event still in the outbox: some of its
// destinations may have no run yet.
type UnsettledEvent struct {
	EventRef
	// ReceivedAt is when the event was recorded.
	ReceivedAt time.Time
	// Claimed lists the destinations that have a first-generation run.
	Claimed []string
	// TraceParent is the event's traceparent (Event.TraceParent), or
	// empty.
	TraceParent string
	// HandedOff is true when the relay enqueued the tasks of the event
	// and of every other event its transaction recorded
	// ([Store.MarkHandedOff]): a task of it missing from the queue now
	// was lost there, not never written.
	HandedOff bool
}

// OutboxCursor is where a walk through the outbox resumes: after the
// event it names, in the order (received_at, source, external_id). The
// zero cursor starts at the oldest event.
type OutboxCursor struct {
	ReceivedAt time.Time
	Source     string
	ExternalID string
}

// OutboxEntry is an outbox row as the walk pages through them: what the
// row itself says, with nothing looked up about its event.
type OutboxEntry struct {
	Source     string
	ExternalID string
	// ReceivedAt is when the event was recorded.
	ReceivedAt time.Time
}

// outboxPageSQL reads up to $5 outbox rows older than $1 ms after the
// cursor ($2, $3, $4), oldest first, and nothing else: under a backlog the
// walk pages through every queued event each time it starts again, and
// only the few whose tasks Redis does not hold as expected need their
// event and runs read (unsettledSQL). The range condition on received_at
// alone lets the walk use the outbox's received_at index.
const outboxPageSQL = `
SELECT o.source, o.external_id, o.received_at
FROM event_outbox o
WHERE o.received_at < now() - $1 * interval '1 millisecond'
  AND o.received_at >= $2
  AND (o.received_at, o.source, o.external_id) > ($2, $3, $4)
ORDER BY o.received_at, o.source, o.external_id
LIMIT $5`

// OutboxPage returns up to limit rows of the outbox recorded more than
// minAge ago, after the cursor, oldest first, and the cursor of the last
// one (the zero cursor when none came back).
func (s *Store) OutboxPage(ctx context.Context, after OutboxCursor, minAge time.Duration, limit int) ([]OutboxEntry, OutboxCursor, error) {
	rows, err := s.pool.Query(ctx, outboxPageSQL, minAge.Milliseconds(), after.ReceivedAt, after.Source, after.ExternalID, limit)
	if err != nil {
		return nil, OutboxCursor{}, fmt.Errorf("error reading the outbox: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (OutboxEntry, error) {
		var e OutboxEntry
		err := row.Scan(&e.Source, &e.ExternalID, &e.ReceivedAt)
		return e, err
	})
	if err != nil {
		return nil, OutboxCursor{}, fmt.Errorf("error reading the outbox: %w", err)
	}
	if len(out) == 0 {
		return nil, OutboxCursor{}, nil
	}
	last := out[len(out)-1]
	return out, OutboxCursor{ReceivedAt: last.ReceivedAt, Source: last.Source, ExternalID: last.ExternalID}, nil
}

// unsettledSQL reads, for each outbox entry ($1 sources, $2 ids), the
// destinations that have a first-generation run, what its event says
// (trace parent, type, plan) and whether the relay marked its
// transaction handed off, in the order given. Each row is found by key,
// so the plan stays a lookup per entry however the tables grew.
const unsettledSQL = `
SELECT ARRAY(SELECT r.destination FROM job_runs r
             WHERE r.source = k.s AND r.external_id = k.x AND r.generation = 1),
       COALESCE(e.trace_parent, ''), e.event_type, e.plan,
       EXISTS (SELECT 1 FROM event_handoffs h
               WHERE h.record_xid = (SELECT o.record_xid FROM event_outbox o
                                     WHERE o.source = k.s AND o.external_id = k.x))
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(s, x, n)
LEFT JOIN LATERAL (SELECT trace_parent, event_type, plan FROM events
                   WHERE source = k.s AND external_id = k.x OFFSET 0) e ON true
ORDER BY k.n`

// UnsettledEvents returns the events of entries (from OutboxPage), in
// the same order, with the destinations that already have a run and what
// their hand-off needs.
func (s *Store) UnsettledEvents(ctx context.Context, entries []OutboxEntry) ([]UnsettledEvent, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	sources, ids := make([]string, len(entries)), make([]string, len(entries))
	for i, e := range entries {
		sources[i], ids[i] = e.Source, e.ExternalID
	}
	rows, err := s.pool.Query(ctx, unsettledSQL, sources, ids)
	if err != nil {
		return nil, fmt.Errorf("error reading the outbox's events: %w", err)
	}
	defer rows.Close()
	out := make([]UnsettledEvent, 0, len(entries))
	for rows.Next() {
		e := entries[len(out)]
		ev := UnsettledEvent{EventRef: EventRef{Source: e.Source, ExternalID: e.ExternalID}, ReceivedAt: e.ReceivedAt}
		var typ *string
		if err := rows.Scan(&ev.Claimed, &ev.TraceParent, &typ, &ev.Plan, &ev.HandedOff); err != nil {
			return nil, fmt.Errorf("error reading the outbox's events: %w", err)
		}
		if typ != nil {
			ev.EventType = *typ
		}
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error reading the outbox's events: %w", err)
	}
	return out, nil
}

// settleSQL deletes the outbox rows of many events at once. Each row is
// found by primary key and locked, in key order, as the claim's settle
// finds them, so two statements settling overlapping batches never
// deadlock; a row another transaction deleted meanwhile is skipped. The
// locked rows are then deleted by tuple id. OFFSET 0 keeps the lookup
// from being flattened into a join of the batch with the outbox. The
// delete by tuple id is a tuple id scan only when the planner knows the
// outbox is not tiny, and like the hand-off mark's (markHandedOffSQL) it
// runs rarely on a table that swings from empty to millions: it is
// planned at every run (SettleEvents), for the table as it is, since a
// plan kept from a nearly empty outbox scans it whole.
const settleSQL = `
WITH found AS MATERIALIZED (
    SELECT o.ctid AS id
    FROM (SELECT s, x FROM unnest($1::text[], $2::text[]) AS u(s, x) ORDER BY s, x) u
    CROSS JOIN LATERAL (SELECT ctid FROM event_outbox WHERE source = u.s AND external_id = u.x OFFSET 0 FOR UPDATE) o
)
DELETE FROM event_outbox WHERE ctid = ANY (ARRAY(SELECT id FROM found))`

// SettleEvents takes refs out of the outbox: every destination of each
// has a run (which from then on is what recovery watches), or its source
// routes it nowhere.
func (s *Store) SettleEvents(ctx context.Context, refs []EventRef) error {
	if len(refs) == 0 {
		return nil
	}
	sources := make([]string, len(refs))
	ids := make([]string, len(refs))
	for i, r := range refs {
		sources[i], ids[i] = r.Source, r.ExternalID
	}
	if _, err := s.pool.Exec(ctx, settleSQL, plannedEachRun, sources, ids); err != nil {
		return fmt.Errorf("error settling events: %w", err)
	}
	return nil
}

// PendingCount returns how many events of sources are in the outbox:
// recorded, with some destination not yet claimed by a worker. Events of
// other sources (a source removed from the configuration) are left out:
// no worker of this configuration will claim them, and counting them
// would report a backlog that never drains. Their rows stay until
// retention, so putting the source back delivers them.
func (s *Store) PendingCount(ctx context.Context, sources []string) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM event_outbox WHERE source = ANY($1)`, sources).Scan(&n); err != nil {
		return 0, fmt.Errorf("error counting pending events: %w", err)
	}
	return n, nil
}

// setPlansSQL keeps the plans ($3, comma-joined) of events ($1, $2)
// recorded without one; a plan already kept stays.
const setPlansSQL = `
UPDATE events e SET plan = string_to_array(u.pl, ',')
FROM unnest($1::text[], $2::text[], $3::text[]) AS u(s, x, pl)
WHERE e.source = u.s AND e.external_id = u.x AND e.plan IS NULL`

// SetPlans keeps the plan of each event of refs that was recorded
// without one (an event recorded before plans were kept, or without a
// plan): the hand-off planned it from the configuration it found, and
// from then on its state is computed over that plan.
func (s *Store) SetPlans(ctx context.Context, refs []EventRef) error {
	if len(refs) == 0 {
		return nil
	}
	var cols eventColumns
	for _, r := range refs {
		cols.add(&Event{Source: r.Source, ExternalID: r.ExternalID, Plan: r.Plan})
	}
	if _, err := s.pool.Exec(ctx, setPlansSQL, cols.sources, cols.externalIDs, cols.plans); err != nil {
		return fmt.Errorf("error keeping events' plans: %w", err)
	}
	return nil
}

// markHandedOffSQL marks transactions ($1) whose every event the relay
// enqueued: one event_handoffs row per transaction, however many events
// it recorded, in xid order (concurrent relays never deadlock).
const markHandedOffSQL = `
INSERT INTO event_handoffs (record_xid)
SELECT DISTINCT x::text::xid8 FROM unnest($1::bigint[]) AS k(x)
ORDER BY 1
ON CONFLICT (record_xid) DO NOTHING`

// MarkHandedOff records that the relay enqueued the tasks of every event
// the transactions xids (Recorded.RecordXID) inserted, so recovery tells
// a task of them Redis lost from one never written.
func (s *Store) MarkHandedOff(ctx context.Context, xids []int64) error {
	if len(xids) == 0 {
		return nil
	}
	if _, err := s.pool.Exec(ctx, markHandedOffSQL, xids); err != nil {
		return fmt.Errorf("error marking events handed off: %w", err)
	}
	return nil
}
