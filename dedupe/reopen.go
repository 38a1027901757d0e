package dedupe

import (
	"context"
	"fmt"
	"time"
)

// reopenUnfinishedSQL puts events back in the relay's outbox when they
// were handed to the queue but fewer of their destinations than the
// source has reached a final status (done, skipped_stale, dead, or failed
// permanently). It works on up to $4 events received between $3 and $8,
// oldest first, starting after the cursor ($7, $5, $6).
var reopenUnfinishedSQL = `
WITH dests AS (
    SELECT * FROM unnest($1::text[], $2::int[]) AS d(source, n)
), candidates AS (
    SELECT e.source, e.external_id, e.received_at
    FROM events e
    JOIN dests d ON d.source = e.source
    WHERE e.received_at >= $3 AND e.received_at < $8
      AND (e.received_at, e.source, e.external_id) > ($7, $5, $6)
      AND NOT ` + outboxHasSQL("e.source", "e.external_id") + `
    ORDER BY e.received_at, e.source, e.external_id
    LIMIT $4
), reopened AS (
    INSERT INTO event_outbox (source, external_id, received_at)
    SELECT c.source, c.external_id, c.received_at
    FROM candidates c JOIN dests d ON d.source = c.source
    WHERE (SELECT count(DISTINCT r.destination) FROM job_runs r
           WHERE r.source = c.source AND r.external_id = c.external_id
             AND (r.status IN ('done', 'skipped_stale', 'dead') OR (r.status = 'failed' AND r.permanent))) < d.n
    ORDER BY c.source, c.external_id
    ON CONFLICT (source, external_id) DO NOTHING
    RETURNING 1
)
SELECT (SELECT count(*) FROM reopened),
       (SELECT count(*) FROM candidates),
       last.received_at, last.source, last.external_id
FROM (SELECT * FROM candidates ORDER BY received_at DESC, source DESC, external_id DESC LIMIT 1) last`

// ReopenUnfinished returns to the relay's outbox every event received
// between since and until whose jobs were handed to the queue but have not
// all finished, so they are enqueued again. It is what recovers from a
// queue that lost its data (a Redis restart without persistence): the
// job keys make the second enqueue harmless for jobs that still exist.
// destinations gives each source's number of destinations. It works in
// batches of batchSize and returns how many events it reopened.
func (s *Store) ReopenUnfinished(ctx context.Context, since, until time.Time, destinations map[string]int, batchSize int) (int, error) {
	sources := make([]string, 0, len(destinations))
	counts := make([]int32, 0, len(destinations))
	for src, n := range destinations {
		sources = append(sources, src)
		counts = append(counts, int32(n))
	}
	var (
		total     int
		cursorAt  = since.Add(-time.Microsecond)
		cursorSrc string
		cursorID  string
	)
	for {
		var reopened, seen int
		var lastAt *time.Time
		var lastSrc, lastID *string
		err := s.pool.QueryRow(ctx, reopenUnfinishedSQL, sources, counts, since, batchSize, cursorSrc, cursorID, cursorAt, until).
			Scan(&reopened, &seen, &lastAt, &lastSrc, &lastID)
		if err != nil {
			if translate(err) == ErrNotFound { // no candidates left
				return total, nil
			}
			return total, fmt.Errorf("error reopening unfinished events: %w", err)
		}
		total += reopened
		if seen < batchSize || lastAt == nil {
			return total, nil
		}
		cursorAt, cursorSrc, cursorID = *lastAt, *lastSrc, *lastID
	}
}
