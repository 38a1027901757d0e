package dedupe

import (
	"context"
	"fmt"
)

// importSQL inserts events that are not stored yet and leaves known ones
// untouched (an import is not a delivery: rerunning it changes nothing).
// New rows go in the relay's outbox, so the reconciler hands them to the
// queue like any event no worker has claimed yet. It names the rows inserted.
const importSQL = `
WITH ` + eventsInputSQL + `, imported AS (
    INSERT INTO events (source, external_id, content_type, headers, payload, order_entity, order_version)
    SELECT s, x, ct, h::jsonb, p, NULLIF(oe, ''), NULLIF(ov, '') FROM input ORDER BY s, x
    ON CONFLICT (source, external_id) DO NOTHING
    RETURNING source, external_id
), recorded AS (
    SELECT source, external_id, true AS inserted FROM imported
), queued AS (` + outboxInsertSQL + `
)
SELECT source, external_id FROM imported`

// ImportEvents stores events that are not stored yet, in one statement,
// and reports for each whether it was new. Copies of one event within the
// call count as new once. Known events are not changed, so an import can
// be rerun from any point.
func (s *Store) ImportEvents(ctx context.Context, events []Event) ([]bool, error) {
	var cols eventColumns
	for i := range events {
		cols.add(&events[i])
	}
	rows, err := s.pool.Query(ctx, importSQL, cols.args()...)
	if err != nil {
		return nil, fmt.Errorf("error importing events: %w", err)
	}
	defer rows.Close()
	inserted := make(map[eventKey]bool, len(events))
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
	out := make([]bool, len(events))
	for i, ev := range events {
		k := eventKey{ev.Source, ev.ExternalID}
		out[i] = inserted[k]
		delete(inserted, k) // a later copy in the same call is not new
	}
	return out, nil
}
