package dedupe

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A statement pgx keeps prepared on a connection gets, after five runs,
// one generic plan, made for its tables' size at that moment and kept
// until they are analyzed again. Made while a table was nearly empty (a
// new deployment's first minutes, or a table analyzed just after a purge
// emptied it), that plan reads the table whole for every key, and as the
// table grows under load the delivery path slows to a crawl until
// autovacuum analyzes it, which can take minutes on a busy cluster
// (docs/performance.md, "Plans made on empty tables"). Planning the
// batched statements at every run instead costs more than it saves, so
// the tables are analyzed when they outgrow their statistics: analyzing
// drops the plans made on them.

// statisticsTables are the tables the delivery path's statements read
// by key.
var statisticsTables = []string{"events", "event_outbox", "event_repeats", "event_digests",
	"job_runs", "delivery_attempts", "entity_versions"}

// minRowsToAnalyze is the fewest rows that make a table worth analyzing
// again: below it, any plan is cheap.
const minRowsToAnalyze = 1000

// grownTablesSQL lists the tables of $1 in the store's schema that hold
// at least $2 rows and more than twice what their last analyze counted
// (or were never analyzed). As a table grows it is analyzed a bounded
// number of times (each time it doubles, when autovacuum, which analyzes
// after a tenth changed, has not come first); one that only churns, as
// the outbox does under a steady load, is not.
const grownTablesSQL = `
SELECT t.relname
FROM pg_stat_user_tables t JOIN pg_class c ON c.oid = t.relid
WHERE t.schemaname = current_schema() AND t.relname = ANY($1)
  AND t.n_mod_since_analyze > 0 AND t.n_live_tup >= $2 AND t.n_live_tup > 2 * c.reltuples
ORDER BY t.relname`

// AnalyzeGrownTables analyzes the delivery path's tables that outgrew
// their statistics and returns their names. A table whose lock is taken
// (autovacuum is on it, or another replica analyzes it) is left to them.
func (s *Store) AnalyzeGrownTables(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, grownTablesSQL, statisticsTables, minRowsToAnalyze)
	if err != nil {
		return nil, fmt.Errorf("error reading table statistics: %w", err)
	}
	grown, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("error reading table statistics: %w", err)
	}
	var analyzed []string
	for _, table := range grown {
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '200ms'`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "ANALYZE "+pgx.Identifier{table}.Sanitize())
			return err
		})
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr) && pgErr.Code == "55P03": // lock_not_available: the lock timeout
			continue
		case err != nil:
			return analyzed, fmt.Errorf("error analyzing %s: %w", table, err)
		}
		analyzed = append(analyzed, table)
	}
	return analyzed, nil
}
