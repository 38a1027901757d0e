package dedupe

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// RuleSample is a stored event as a destination's rules see it, for
// trying rules on what was received (POST /admin/rules/test).
type RuleSample struct {
	ExternalID string
	StoredEvent
}

// ruleSamplesSQL reads a source's newest events received at or after $2,
// at most $3, through events' (source, received_at) order.
const ruleSamplesSQL = `
SELECT external_id, COALESCE(event_type, ''), received_at, headers, content_type, payload
FROM events
WHERE source = $1 AND received_at >= $2
ORDER BY received_at DESC, external_id DESC
LIMIT $3`

// RuleSamples returns source's newest events received since (zero: any
// time), at most limit, newest first. It returns ErrTooSlow past
// AdminStatementTimeout.
func (s *Store) RuleSamples(ctx context.Context, source string, since time.Time, limit int) ([]RuleSample, error) {
	var out []RuleSample
	err := s.adminTx(ctx, false, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, ruleSamplesSQL, source, since, limit)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (RuleSample, error) {
			var r RuleSample
			err := row.Scan(&r.ExternalID, &r.EventType, &r.ReceivedAt, &r.Headers, &r.ContentType, &r.Payload)
			return r, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("error reading events of %s to try rules on: %w", source, err)
	}
	return out, nil
}
