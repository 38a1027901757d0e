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
