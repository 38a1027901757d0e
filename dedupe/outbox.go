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

// outboxHasSQL is an expression that is true while the event (source,
// externalID, two SQL expressions) has a row in the relay's outbox: its
// hand-off to the queue is pending.
func outboxHasSQL(source, externalID string) string {
	return `EXISTS (SELECT 1 FROM event_outbox o WHERE o.source = ` + source + ` AND o.external_id = ` + externalID + `)`
}

// markEnqueuedSQL confirms the hand-off of many events at once by deleting
// their outbox rows. Each row is found by primary key, in key order, and
// deleted by its tuple id in that order, so two relays confirming
// overlapping batches never deadlock; a row another transaction deleted
// meanwhile is skipped. A join on the key lets the planner scan the whole
// outbox, dead rows included, whenever its statistics say the outbox is
// nearly empty, which they usually do; OFFSET 0 keeps the per-key lookup
// from being flattened into such a join.
const markEnqueuedSQL = `
WITH found AS MATERIALIZED (
    SELECT o.ctid AS id
    FROM (SELECT s, x FROM unnest($1::text[], $2::text[]) AS u(s, x) ORDER BY s, x) u
    CROSS JOIN LATERAL (SELECT ctid FROM event_outbox WHERE source = u.s AND external_id = u.x OFFSET 0) o
)
DELETE FROM event_outbox o USING found f WHERE o.ctid = f.id`

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
SELECT source, external_id FROM event_outbox
WHERE received_at < now() - $2 * interval '1 millisecond'
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
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM event_outbox`).Scan(&n); err != nil {
		return 0, fmt.Errorf("error counting pending events: %w", err)
	}
	return n, nil
}
