package dedupe

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Pause is an operator's pause of a destination (table destination_pauses).
type Pause struct {
	Source, Destination string
	// PausedAt is when it was paused; PausedBy and Reason say who and why.
	PausedAt         time.Time
	PausedBy, Reason string
}

const pauseSQL = `
INSERT INTO destination_pauses (source, destination, paused_by, reason)
VALUES ($1, $2, $3, $4)
ON CONFLICT (source, destination) DO NOTHING`

// PauseDestination records that by paused destination of source, for
// reason. It reports false when it was paused already (the first pause's
// record stays).
func (s *Store) PauseDestination(ctx context.Context, source, destination, by, reason string) (bool, error) {
	tag, err := s.pool.Exec(ctx, pauseSQL, source, destination, by, reason)
	if err != nil {
		return false, fmt.Errorf("error pausing destination: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// ResumeDestination deletes the pause of destination of source. It
// reports false when it was not paused.
func (s *Store) ResumeDestination(ctx context.Context, source, destination string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM destination_pauses WHERE source = $1 AND destination = $2`, source, destination)
	if err != nil {
		return false, fmt.Errorf("error resuming destination: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// PausedDestinations returns every pause, by source and destination.
func (s *Store) PausedDestinations(ctx context.Context) ([]Pause, error) {
	rows, err := s.pool.Query(ctx, `
SELECT source, destination, paused_at, paused_by, reason FROM destination_pauses ORDER BY source, destination`)
	if err != nil {
		return nil, fmt.Errorf("error reading paused destinations: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Pause])
	if err != nil {
		return nil, fmt.Errorf("error reading paused destinations: %w", err)
	}
	return out, nil
}
