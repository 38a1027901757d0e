package dedupe

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// plannedEachRun, given as a statement's first argument, has Postgres plan
// the statement for the tables as they are at every run, instead of
// keeping it prepared on its connection with one generic plan made for
// the tables' size then (statistics.go). It is given to statements that
// run rarely on tables that swing from empty to millions (the settle, the
// hand-off mark, retention's deletes), where planning costs nothing that
// matters; the batched statements of the delivery path keep their
// prepared plans, which AnalyzeGrownTables renews as their tables grow.
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
