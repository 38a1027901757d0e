package dedupe

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// plannedEachRun, given as a statement's first argument, has Postgres plan
// the statement for the tables as they are at every run: pgx otherwise
// keeps it prepared on its connection, where after five runs Postgres
// keeps one generic plan, made for the tables' size then, until the
// tables are analyzed again. A plan made while a table was nearly empty
// (a new deployment, or one analyzed after a purge) reads it whole for
// every key, and autovacuum may take minutes to analyze it again
// (docs/performance.md, "Plans made on empty tables"). The statements given it
// are the batched ones on the delivery path (one plan per batch, not per
// event) and rare ones whose tables swing from empty to millions.
const plannedEachRun = pgx.QueryExecModeCacheDescribe

// ErrNotFound is returned when the event or run asked for does not exist.
var ErrNotFound = errors.New("not found")

// DB is what dedupe needs to run a statement: a *pgxpool.Pool, a
// *pgx.Conn or a pgx.Tx all satisfy it, so callers can run dedupe
// operations inside their own transaction.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Store runs webhookd's statements on a connection pool.
type Store struct {
	pool *pgxpool.Pool
}

// New returns a Store on pool.
func New(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool}
}

// translate maps driver errors to this package's errors.
func translate(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	return err
}
