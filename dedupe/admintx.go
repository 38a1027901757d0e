package dedupe

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// AdminStatementTimeout bounds each statement of the admin reads and
// replays ([Store.ListEvents], [Store.CountEvents], [Store.GetEvent],
// [Store.Runs], [Store.ReopenRun], [Store.NewGeneration]): they run in a
// transaction that sets it as statement_timeout, so no admin page or CLI
// call holds a connection and Postgres for long, whatever the table size
// or the locks it meets. Each has an index-backed plan (admin_plan_test.go).
const AdminStatementTimeout = 5 * time.Second

// ErrTooSlow is returned by the admin reads and replays when a statement
// ran past AdminStatementTimeout (a lock held elsewhere, an overloaded
// database); nothing was changed. Try again, or narrow the filter.
var ErrTooSlow = errors.New("the database took longer than the admin statement timeout")

// adminSettingsSQL starts every admin transaction: each statement gets
// AdminStatementTimeout, and is planned for the values it is given. A
// prepared statement's generic plan, made without them, cannot tell a
// quiet source from a busy one and walked every source's events by time
// to fill a page of a quiet one; admin statements are few, so planning
// each costs nothing that matters.
var adminSettingsSQL = "SET LOCAL statement_timeout = " + strconv.FormatInt(AdminStatementTimeout.Milliseconds(), 10) +
	"; SET LOCAL plan_cache_mode = force_custom_plan"

// adminTx runs fn in a transaction (read-only unless write) set up by
// adminSettingsSQL.
func (s *Store) adminTx(ctx context.Context, write bool, fn func(tx pgx.Tx) error) error {
	mode := pgx.ReadOnly
	if write {
		mode = pgx.ReadWrite
	}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: mode}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, adminSettingsSQL); err != nil {
			return fmt.Errorf("error setting up the admin transaction: %w", err)
		}
		return fn(tx)
	})
	var pgErr *pgconn.PgError
	if ctx.Err() == nil && errors.As(err, &pgErr) && pgErr.Code == "57014" { // query_canceled: the timeout
		return fmt.Errorf("%w (%s)", ErrTooSlow, AdminStatementTimeout)
	}
	return err
}
