package dedupe

import (
	"context"
	"fmt"
	"time"
)

// ImportedEvent is one event of a provider's export, as an import stores
// it.
type ImportedEvent struct {
	Event
	// ReceivedAt is when the provider sent the event, kept as the
	// event's received_at and last_received_at (so retention counts from
	// it, and the admin listing places it there); zero means now.
	ReceivedAt time.Time
}

// ImportOptions say how an import stores its events.
type ImportOptions struct {
	// RecordOnly stores the events as delivered elsewhere: a later
	// delivery of the same id is a duplicate, but they get no outbox row
	// and no runs, so neither the relay nor the reconciler forwards them;
	// their state is StateRecordedOnly until an operator replays them.
	RecordOnly bool
}

// importSQL inserts events that are not stored yet and leaves known ones
// untouched (an import is not a delivery: rerunning it changes nothing,
// and never turns a forwarded event into a recorded-only one or back).
// New rows go in the relay's outbox, so the reconciler hands them to the
// queue like any event no worker has claimed yet, unless they are
// recorded only ($9), which get no plan: a replay plans them. A NULL
// received_at ($8) means now; $11 are the plans (Event.Plan,
// comma-joined; NULL for none). It names the rows inserted.
const importSQL = `
WITH input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bytea[],
                         $6::text[], $7::text[], $8::timestamptz[], $10::text[], $11::text[])
        AS u(s, x, ct, h, p, oe, ov, at, t, pl)
), imported AS (
    INSERT INTO events (source, external_id, content_type, headers, payload, order_entity, order_version,
                        received_at, last_received_at, recorded_only, event_type, plan)
    SELECT s, x, ct, h::jsonb, p, NULLIF(oe, ''), NULLIF(ov, ''),
           COALESCE(at, now()), COALESCE(at, now()), $9::boolean, NULLIF(t, ''),
           CASE WHEN NOT $9::boolean THEN string_to_array(pl, ',') END
    FROM input ORDER BY s, x
    ON CONFLICT (source, external_id) DO NOTHING
    RETURNING source, external_id
), recorded AS (
    -- What the outbox takes: the new rows, unless recorded only.
    SELECT source, external_id, NOT $9::boolean AS inserted FROM imported
), queued AS (` + outboxInsertSQL + `
)
SELECT source, external_id FROM imported`

// ImportEvents stores events that are not stored yet, in one statement,
// and reports for each whether it was new. Copies of one event within the
// call count as new once. Known events are not changed, so an import can
// be rerun from any point.
func (s *Store) ImportEvents(ctx context.Context, events []ImportedEvent, opts ImportOptions) ([]bool, error) {
	n := len(events)
	var (
		sources, ids, types, headers, entities, versions = make([]string, n), make([]string, n), make([]string, n),
			make([]string, n), make([]string, n), make([]string, n)
		payloads = make([][]byte, n)
		at       = make([]*time.Time, n)
		evTypes  = make([]string, n)
		cols     eventColumns
	)
	for i := range events {
		ev := &events[i]
		h := ev.Headers
		if len(h) == 0 {
			h = []byte("{}")
		}
		sources[i], ids[i], types[i], headers[i] = ev.Source, ev.ExternalID, ev.ContentType, string(h)
		payloads[i], entities[i], versions[i], evTypes[i] = ev.Payload, ev.OrderEntity, ev.OrderVersion, ev.EventType
		if !ev.ReceivedAt.IsZero() {
			at[i] = &ev.ReceivedAt
		}
		cols.add(&ev.Event)
	}
	rows, err := s.pool.Query(ctx, importSQL, sources, ids, types, headers, payloads, entities, versions, at, opts.RecordOnly, evTypes, cols.plans)
	if err != nil {
		return nil, fmt.Errorf("error importing events: %w", err)
	}
	defer rows.Close()
	inserted := make(map[eventKey]bool, n)
	for rows.Next() {
		var k eventKey
		if err := rows.Scan(&k.source, &k.externalID); err != nil {
			return nil, fmt.Errorf("error importing events: %w", err)
		}
		inserted[k] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error importing events: %w", err)
	}
	out := make([]bool, n)
	for i, ev := range events {
		k := eventKey{ev.Source, ev.ExternalID}
		out[i] = inserted[k]
		delete(inserted, k) // a later copy in the same call is not new
	}
	return out, nil
}
