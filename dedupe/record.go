package dedupe

import (
	"context"
	"fmt"
)

// Event is one inbound webhook as the gateway received it.
type Event struct {
	// Source is the configured source name.
	Source string
	// ExternalID is the sender's event id.
	ExternalID string
	// ContentType is the request's Content-Type, forwarded as is.
	ContentType string
	// Headers is a JSON object of the request headers worth keeping.
	Headers []byte
	// Payload is the raw body.
	Payload []byte
	// OrderEntity and OrderVersion are set when the source orders events
	// of one entity; both empty otherwise.
	OrderEntity, OrderVersion string
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
	// RunStatuses lists the statuses of the event's job runs; empty for a
	// first delivery.
	RunStatuses []string
}

type eventKey struct{ source, externalID string }

// recordSQL inserts many events at once. A repeat adds the number of
// copies in this statement to the delivery count. RETURNING reports, per
// row, whether it was inserted (xmax = 0), whether its hand-off is pending,
// and for repeats the statuses of its runs.
const recordSQL = `
INSERT INTO events AS e
    (source, external_id, deliveries, content_type, headers, payload, order_entity, order_version)
SELECT s, x, d, ct, h::jsonb, p, NULLIF(oe, ''), NULLIF(ov, '')
FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::text[], $6::bytea[], $7::text[], $8::text[])
    AS u(s, x, d, ct, h, p, oe, ov)
ORDER BY s, x -- one lock order for every statement: concurrent batches never deadlock
ON CONFLICT (source, external_id) DO UPDATE
    SET deliveries = e.deliveries + EXCLUDED.deliveries,
        last_received_at = now()
RETURNING e.source, e.external_id, e.deliveries, e.xmax = 0, e.enqueued_at IS NULL,
    CASE WHEN e.xmax = 0 THEN NULL ELSE
        (SELECT array_agg(r.status ORDER BY r.key) FROM job_runs r
         WHERE r.source = e.source AND r.external_id = e.external_id)
    END`

// RecordBatch records events in one statement and returns one result per
// event, in order. Copies of one event within the batch are answered as if
// they had arrived one after the other: the first may be the insert, the
// rest are repeats with increasing delivery counts.
func RecordBatch(ctx context.Context, db DB, events []Event) ([]Recorded, error) {
	n := len(events)
	index := make(map[eventKey]int, n)
	unique := make([]int, 0, n) // position in events of each distinct key
	slot := make([]int, n)      // distinct key index of each event
	var (
		sources     = make([]string, 0, n)
		externalIDs = make([]string, 0, n)
		copies      = make([]int32, 0, n)
		contentType = make([]string, 0, n)
		headers     = make([]string, 0, n)
		payloads    = make([][]byte, 0, n)
		entities    = make([]string, 0, n)
		versions    = make([]string, 0, n)
	)
	for i := range events {
		ev := &events[i]
		k := eventKey{ev.Source, ev.ExternalID}
		if u, ok := index[k]; ok {
			slot[i] = u
			copies[u]++
			continue
		}
		u := len(unique)
		index[k] = u
		slot[i] = u
		unique = append(unique, i)
		sources = append(sources, ev.Source)
		externalIDs = append(externalIDs, ev.ExternalID)
		copies = append(copies, 1)
		contentType = append(contentType, ev.ContentType)
		h := ev.Headers
		if len(h) == 0 {
			h = []byte("{}")
		}
		headers = append(headers, string(h))
		payloads = append(payloads, ev.Payload)
		entities = append(entities, ev.OrderEntity)
		versions = append(versions, ev.OrderVersion)
	}

	rows, err := db.Query(ctx, recordSQL, sources, externalIDs, copies, contentType, headers, payloads, entities, versions)
	if err != nil {
		return nil, fmt.Errorf("error recording events: %w", err)
	}
	perKey := make([]Recorded, len(unique))
	seen := 0
	for rows.Next() {
		var (
			k   eventKey
			rec Recorded
		)
		if err := rows.Scan(&k.source, &k.externalID, &rec.Deliveries, &rec.Inserted, &rec.Pending, &rec.RunStatuses); err != nil {
			rows.Close()
			return nil, fmt.Errorf("error reading recorded events: %w", err)
		}
		u, ok := index[k]
		if !ok {
			rows.Close()
			return nil, fmt.Errorf("error recording events: unexpected row %s/%s", k.source, k.externalID)
		}
		perKey[u] = rec
		seen++
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error recording events: %w", err)
	}
	if seen != len(unique) {
		return nil, fmt.Errorf("error recording events: %d rows returned for %d events", seen, len(unique))
	}

	// Spread each key's result over its copies, in arrival order.
	results := make([]Recorded, n)
	nth := make([]int, len(unique))
	for i := range events {
		u := slot[i]
		rec := perKey[u]
		j := nth[u]
		nth[u]++
		first := rec.Deliveries - int(copies[u]) + 1 // delivery number of the first copy
		r := rec
		r.Deliveries = first + j
		r.Inserted = rec.Inserted && j == 0
		results[i] = r
	}
	return results, nil
}
