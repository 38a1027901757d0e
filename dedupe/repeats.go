package dedupe

import (
	"context"
	"fmt"
)

// Repeat deliveries. An event's row (events) is written once, by its
// first delivery; it holds in deliveries the copies that came with that
// delivery. Every later delivery of the event is counted in its narrow
// row of event_repeats (migration 0021): repeats and the time of the
// latest. Counting a repeat thus rewrites a small row, not the event's
// wide one (headers, payload). The view event_deliveries adds the two
// up; everything that reads an event's delivery count or last delivery
// reads it there (deliveriesSQL, lastReceivedSQL). All writes to
// event_repeats are in this file, except retention's delete.

// countRepeatsSQL is the CTE "repeated": it adds each row of the CTE
// from (columns s, x and d, the copies) whose key the CTE inserted (with
// source and external_id) does not hold to that key's repeats, and
// returns source, external_id and the repeats counted so far, this
// statement's included. An upsert waits for a concurrent one on the same
// key and adds to what it committed, so the counts are exact and each
// statement's are its own.
func countRepeatsSQL(from, inserted string) string {
	return `repeated AS (
    INSERT INTO event_repeats AS r (source, external_id, repeats, last_received_at)
    SELECT f.s, f.x, f.d, now() FROM ` + from + ` f
    WHERE NOT EXISTS (SELECT 1 FROM ` + inserted + ` i WHERE i.source = f.s AND i.external_id = f.x)
    ORDER BY f.s, f.x
    ON CONFLICT (source, external_id) DO UPDATE
        SET repeats = r.repeats + EXCLUDED.repeats, last_received_at = EXCLUDED.last_received_at
    RETURNING r.source, r.external_id, r.repeats
)`
}

// repeatsOfUnseenSQL reads what recordSQL could not for repeats whose
// event committed after its snapshot: the event's own count ($1, $2:
// keys), its pending hand-off and its state. Such an event was written by a first delivery a moment ago and
// its count is final. A key whose event is gone (retention deleted it
// between the insert's check and the count) reads as a lone delivery
// with no runs.
var repeatsOfUnseenSQL = `
SELECT k.s, k.x, COALESCE(e.deliveries, 1), t.pending, ` + repeatStateSQL("t") + `
FROM unnest($1::text[], $2::text[]) AS k(s, x)
LEFT JOIN LATERAL (
    SELECT deliveries, recorded_only, plan FROM events WHERE source = k.s AND external_id = k.x OFFSET 0
) e ON true
CROSS JOIN LATERAL (
    SELECT k.s AS source, k.x AS external_id, COALESCE(e.recorded_only, false) AS recorded_only, e.plan,
           ` + outboxHasSQL("k.s", "k.x") + ` AS pending
) t`

// reportUnseenRepeats completes perKey's results at the slots unseen
// (keys recordSQL counted as repeats without seeing their event) with
// their event's own count, pending hand-off and state.
func reportUnseenRepeats(ctx context.Context, db DB, cols *eventColumns, unseen []int, perKey []Recorded) error {
	sources, ids := make([]string, len(unseen)), make([]string, len(unseen))
	slot := make(map[eventKey]int, len(unseen))
	for i, u := range unseen {
		sources[i], ids[i] = cols.sources[u], cols.externalIDs[u]
		slot[eventKey{sources[i], ids[i]}] = u
	}
	rows, err := db.Query(ctx, repeatsOfUnseenSQL, sources, ids)
	if err != nil {
		return fmt.Errorf("error reading repeated events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			k     eventKey
			base  int
			state string
			pend  bool
		)
		if err := rows.Scan(&k.source, &k.externalID, &base, &pend, &state); err != nil {
			return fmt.Errorf("error reading repeated events: %w", err)
		}
		u := slot[k]
		perKey[u].Deliveries += base
		perKey[u].Pending, perKey[u].State = pend, state
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("error reading repeated events: %w", err)
	}
	return nil
}

// deliveriesSQL is an SQL expression: the delivery count of the event
// (source, externalID, two SQL expressions), repeats included, or NULL
// when there is no such event.
func deliveriesSQL(source, externalID string) string {
	return `(SELECT d.deliveries FROM event_deliveries d WHERE d.source = ` + source + ` AND d.external_id = ` + externalID + `)`
}

// lastReceivedSQL is an SQL expression: when the event (source,
// externalID, two SQL expressions) was last delivered, or NULL when
// there is no such event.
func lastReceivedSQL(source, externalID string) string {
	return `(SELECT d.last_received_at FROM event_deliveries d WHERE d.source = ` + source + ` AND d.external_id = ` + externalID + `)`
}
