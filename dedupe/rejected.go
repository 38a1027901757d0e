package dedupe

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Rejected is a request to /webhooks/:source answered 4xx, as kept
// (table rejected_requests, migration 0026).
type Rejected struct {
	// ID orders the records; set when read.
	ID int64
	// At is when it was answered.
	At time.Time
	// Source is the :source it named (configured or not).
	Source string
	// Remote is the client's address (the TCP peer).
	Remote string
	// Status is the answer's status, Reason why.
	Status int
	Reason string
	// Headers is the JSON object of its headers, credentials left out and
	// signatures masked as an event's are; nil when they could not be
	// kept.
	Headers []byte
	// Body is its first bytes (at most 4 KiB); BodyBytes how many it had.
	Body      []byte
	BodyBytes int
}

const recordRejectedSQL = `
INSERT INTO rejected_requests (received_at, source, remote, status, reason, headers, body, body_bytes)
SELECT * FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::int[], $5::text[], $6::jsonb[], $7::bytea[], $8::int[])`

// RecordRejected keeps rs in one statement.
func (s *Store) RecordRejected(ctx context.Context, rs []Rejected) error {
	n := len(rs)
	at, src, remote, reason := make([]time.Time, n), make([]string, n), make([]string, n), make([]string, n)
	status, size := make([]int32, n), make([]int32, n)
	headers, body := make([]*string, n), make([][]byte, n)
	for i, r := range rs {
		at[i], src[i], remote[i], reason[i] = r.At, r.Source, r.Remote, r.Reason
		status[i], size[i], body[i] = int32(r.Status), int32(r.BodyBytes), r.Body
		if body[i] == nil {
			body[i] = []byte{} // nil would be NULL
		}
		if r.Headers != nil {
			h := string(r.Headers)
			headers[i] = &h
		}
	}
	if _, err := s.pool.Exec(ctx, recordRejectedSQL, at, src, remote, status, reason, headers, body, size); err != nil {
		return fmt.Errorf("error keeping %d rejected requests: %w", n, err)
	}
	return nil
}

// ListRejected returns the newest rejected requests (of source, when
// not empty) before the one with id before (0: from the newest), at most
// limit. It returns ErrTooSlow past AdminStatementTimeout.
func (s *Store) ListRejected(ctx context.Context, source string, before int64, limit int) ([]Rejected, error) {
	var out []Rejected
	err := s.adminTx(ctx, false, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
SELECT id, received_at, source, remote, status, reason, headers::text, body, body_bytes
FROM rejected_requests
WHERE ($1 = '' OR source = $1) AND ($2 = 0 OR id < $2)
ORDER BY id DESC LIMIT $3`, source, before, limit)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Rejected, error) {
			var r Rejected
			var headers *string
			err := row.Scan(&r.ID, &r.At, &r.Source, &r.Remote, &r.Status, &r.Reason, &headers, &r.Body, &r.BodyBytes)
			if headers != nil {
				r.Headers = []byte(*headers)
			}
			return r, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("error listing rejected requests: %w", err)
	}
	return out, nil
}

// DeleteRejectedBefore deletes the rejected requests answered before t.
func (s *Store) DeleteRejectedBefore(ctx context.Context, t time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM rejected_requests WHERE received_at < $1`, t)
	if err != nil {
		return 0, fmt.Errorf("error deleting old rejected requests: %w", err)
	}
	return tag.RowsAffected(), nil
}
