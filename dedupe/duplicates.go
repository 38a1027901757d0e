package dedupe

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultDuplicateWindow is how far back [Store.DuplicateKeys] looks when
// given no window: 7 days.
const DefaultDuplicateWindow = 7 * 24 * time.Hour

// DuplicateKey is a key the destination accepted more than once: the
// proof, in production, that a promise was broken.
type DuplicateKey struct {
	// Key is the job key.
	Key string
	// Successes counts its successful destination calls in the window.
	Successes int
	// First and Last are the times of the first and latest of them.
	First, Last time.Time
}

// duplicateKeysSQL counts successful calls per key in delivery_attempts
// since the window's start; delivery_attempts_created_at_idx bounds the
// scan to the window.
const duplicateKeysSQL = `
SELECT key, count(*)::int, min(created_at), max(created_at)
FROM delivery_attempts
WHERE succeeded AND created_at >= now() - $1 * interval '1 millisecond'
GROUP BY key
HAVING count(*) > 1
ORDER BY max(created_at) DESC, key
LIMIT $2`

// maxDuplicateKeys caps the keys DuplicateKeys lists.
const maxDuplicateKeys = 1000

// DuplicateKeys returns the keys with more than one successful
// destination call in the last window (DefaultDuplicateWindow when window
// is not positive), newest first, at most 1000 of them. An empty result
// is the expected answer.
func (s *Store) DuplicateKeys(ctx context.Context, window time.Duration) ([]DuplicateKey, error) {
	if window <= 0 {
		window = DefaultDuplicateWindow
	}
	rows, err := s.pool.Query(ctx, duplicateKeysSQL, window.Milliseconds(), maxDuplicateKeys)
	if err != nil {
		return nil, fmt.Errorf("error checking duplicate keys: %w", err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowToStructByPos[DuplicateKey])
	if err != nil {
		return nil, fmt.Errorf("error checking duplicate keys: %w", err)
	}
	return keys, nil
}

// UnknownCall is a destination call whose outcome was never stored: the
// worker stopped between logging the call and storing what the
// destination answered. The destination may have acted on it, so it is a
// possible duplicate of the key's later calls: the duplicate check above
// counts only outcomes that were stored.
type UnknownCall struct {
	// Key is the job key; Call numbers the call among the key's calls.
	Key  string
	Call int
	// StartedAt is when the call was logged.
	StartedAt time.Time
	// LaterSuccess is true when a later call of the key succeeded: if the
	// destination acted on this one too, it acted twice.
	LaterSuccess bool
}

// unknownCallsSQL lists calls of unknown outcome since the window's
// start, newest first; delivery_attempts_created_at_idx bounds the scan to
// the window. A call whose outcome was stored after all is not one: a
// worker's late answer and the sweep that gave up on it may each have
// written a row for the call, when neither saw the other's (sweepSQL).
const unknownCallsSQL = `
SELECT u.key, u.call, u.created_at,
       EXISTS (SELECT 1 FROM delivery_attempts s WHERE s.key = u.key AND s.call > u.call AND s.succeeded),
       count(*) OVER ()
FROM delivery_attempts u
WHERE u.state = 'unknown' AND u.created_at >= now() - $1 * interval '1 millisecond'
  AND NOT EXISTS (SELECT 1 FROM delivery_attempts f WHERE f.key = u.key AND f.call = u.call AND f.state = 'finished')
ORDER BY u.created_at DESC, u.key
LIMIT $2`

// UnknownCalls returns how many calls of unknown outcome were logged in
// the last window (DefaultDuplicateWindow when window is not positive)
// and the newest of them, at most 1000.
func (s *Store) UnknownCalls(ctx context.Context, window time.Duration) (int, []UnknownCall, error) {
	if window <= 0 {
		window = DefaultDuplicateWindow
	}
	rows, err := s.pool.Query(ctx, unknownCallsSQL, window.Milliseconds(), maxDuplicateKeys)
	if err != nil {
		return 0, nil, fmt.Errorf("error listing calls of unknown outcome: %w", err)
	}
	defer rows.Close()
	var (
		total int
		calls []UnknownCall
	)
	for rows.Next() {
		var c UnknownCall
		if err := rows.Scan(&c.Key, &c.Call, &c.StartedAt, &c.LaterSuccess, &total); err != nil {
			return 0, nil, fmt.Errorf("error listing calls of unknown outcome: %w", err)
		}
		calls = append(calls, c)
	}
	if err := rows.Err(); err != nil {
		return 0, nil, fmt.Errorf("error listing calls of unknown outcome: %w", err)
	}
	return total, calls, nil
}
