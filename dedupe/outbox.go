package dedupe

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// EventRef names an event.
type EventRef struct {
	Source     string
	ExternalID string
}

// markEnqueuedSQL confirms the hand-off of many events at once. Each row
// is found by primary key and locked, in key order (the order RecordBatch
// uses, so the two never deadlock); whether it is still pending is read
// from the locked row. A condition on events.enqueued_at in the scan would
// let the planner walk the whole pending index instead, dead entries
// included (seconds per call on a large table whose statistics say nothing
// is pending), and a join on the key lets it scan the whole table when its
// estimates are off; one lookup per key does neither.
const markEnqueuedSQL = `
WITH locked AS MATERIALIZED (
    SELECT u.s, u.x, e2.enqueued_at
    FROM (SELECT s, x FROM unnest($1::text[], $2::text[]) AS u(s, x) ORDER BY s, x) u
    CROSS JOIN LATERAL (SELECT enqueued_at FROM events WHERE source = u.s AND external_id = u.x FOR UPDATE) e2
)
UPDATE events e SET enqueued_at = now()
FROM locked
WHERE e.source = locked.s AND e.external_id = locked.x AND locked.enqueued_at IS NULL`

// MarkEnqueued records that the jobs of refs are in the queue, so the relay
// leaves them alone.
func MarkEnqueued(ctx context.Context, db DB, refs []EventRef) error {
	if len(refs) == 0 {
		return nil
	}
	sources := make([]string, len(refs))
	ids := make([]string, len(refs))
	for i, r := range refs {
		sources[i], ids[i] = r.Source, r.ExternalID
	}
	if _, err := db.Exec(ctx, markEnqueuedSQL, sources, ids); err != nil {
		return fmt.Errorf("error marking events enqueued: %w", err)
	}
	return nil
}

// MarkEnqueued records that the jobs of refs are in the queue.
func (s *Store) MarkEnqueued(ctx context.Context, refs []EventRef) error {
	return MarkEnqueued(ctx, s.pool, refs)
}

const pendingSQL = `
SELECT source, external_id FROM events
WHERE enqueued_at IS NULL AND received_at < now() - $2 * interval '1 millisecond'
ORDER BY received_at
LIMIT $1
FOR UPDATE SKIP LOCKED`

// RelayPending finds up to limit events older than minAge whose hand-off
// is still pending, passes them to enqueue, and marks those enqueue
// reports done as enqueued, all in one transaction. Rows being relayed by
// another replica are skipped, so every replica may run the relay. It
// returns how many events were marked.
func (s *Store) RelayPending(ctx context.Context, limit int, minAge time.Duration,
	enqueue func(context.Context, []EventRef) []EventRef) (int, error) {
	var marked int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, pendingSQL, limit, minAge.Milliseconds())
		if err != nil {
			return err
		}
		refs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[EventRef])
		if err != nil {
			return err
		}
		if len(refs) == 0 {
			return nil
		}
		done := enqueue(ctx, refs)
		marked = len(done)
		return MarkEnqueued(ctx, tx, done)
	})
	if err != nil {
		return 0, fmt.Errorf("error relaying pending events: %w", err)
	}
	return marked, nil
}

// PendingCount returns how many events wait for their hand-off to the
// queue (the relay backlog).
func (s *Store) PendingCount(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE enqueued_at IS NULL`).Scan(&n); err != nil {
		return 0, fmt.Errorf("error counting pending events: %w", err)
	}
	return n, nil
}
