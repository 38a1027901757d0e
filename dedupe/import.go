package dedupe

import (
	"context"
	"fmt"
)

// importSQL inserts events that are not stored yet and leaves known ones
// untouched (an import is not a delivery: rerunning it changes nothing).
// New rows have enqueued_at NULL, so the relay hands them to the queue
// like any event whose hand-off is pending. RETURNING names the rows
// inserted.
const importSQL = `
INSERT INTO events (source, external_id, content_type, headers, payload, order_entity, order_version)
SELECT s, x, ct, h::jsonb, p, NULLIF(oe, ''), NULLIF(ov, '')
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bytea[], $6::text[], $7::text[])
    AS u(s, x, ct, h, p, oe, ov)
ON CONFLICT (source, external_id) DO NOTHING
RETURNING source, external_id`

// ImportEvents stores events that are not stored yet, in one statement,
// and reports for each whether it was new. Copies of one event within the
// call count as new once. Known events are not changed, so an import can
// be rerun from any point.
func (s *Store) ImportEvents(ctx context.Context, events []Event) ([]bool, error) {
	n := len(events)
	var (
		sources  = make([]string, n)
		ids      = make([]string, n)
		cts      = make([]string, n)
		headers  = make([]string, n)
		payloads = make([][]byte, n)
		entities = make([]string, n)
		versions = make([]string, n)
	)
	for i, ev := range events {
		sources[i], ids[i], cts[i], payloads[i] = ev.Source, ev.ExternalID, ev.ContentType, ev.Payload
		entities[i], versions[i] = ev.OrderEntity, ev.OrderVersion
		headers[i] = string(ev.Headers)
		if len(ev.Headers) == 0 {
			headers[i] = "{}"
		}
	}
	rows, err := s.pool.Query(ctx, importSQL, sources, ids, cts, headers, payloads, entities, versions)
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
