package dedupe

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/testkit/pgtest"
)

// TestRecoveryQueriesReadOnlyUnsettledRows: every recovery pass runs the
// sweep, the due-run walk and the outbox walk, on every process, however
// large the tables grow. Each must read only what is unsettled, through
// an index that holds only such rows (or, for the outbox, a table that
// does: its dead rows are vacuum's), never a scan of settled history. Checked by plan on tables of
// settled runs and events with statistics taken when almost nothing was
// unsettled, the case that once made the planner walk whole indexes.
func TestRecoveryQueriesReadOnlyUnsettledRows(t *testing.T) {
	t.Parallel()
	schema := pgtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	execSQL(t, ctx, schema, `INSERT INTO events (source, external_id, payload) SELECT 'src', 'old_' || g, '{}' FROM generate_series(1, 30000) g`)
	execSQL(t, ctx, schema, `INSERT INTO job_runs (key, source, external_id, destination, status, calls, attempts, max_attempts, completed_at)
        SELECT 'src:dst:old_' || g, 'src', 'old_' || g, 'dst', 'done', 1, 0, 5, now() FROM generate_series(1, 30000) g`)
	// The outbox held every event once; a few are still unsettled.
	execSQL(t, ctx, schema, `DELETE FROM event_outbox WHERE external_id NOT LIKE 'old_1__'`)
	execSQL(t, ctx, schema, `UPDATE job_runs SET status = 'failed', retry_at = now() - interval '1 minute' WHERE external_id LIKE 'old_2__'`)
	execSQL(t, ctx, schema, `UPDATE job_runs SET status = 'running', lease_until = now() + interval '1 minute' WHERE external_id LIKE 'old_3__'`)
	execSQL(t, ctx, schema, `ANALYZE events, job_runs, event_outbox`)

	for _, q := range []struct {
		name  string
		sql   string
		args  []any
		reads map[string]string // table → the index it is read through (or by primary key)
	}{
		{"sweep", sweepSQL, []any{100},
			map[string]string{"job_runs": "job_runs_lease_idx", "delivery_attempts": "delivery_attempts_key_idx"}},
		{"due runs", dueRunsSQL, []any{int64(2000), time.Time{}, "", 500},
			map[string]string{"job_runs": "job_runs_retry_idx"}},
		// The outbox holds only unsettled events: read whole or by index.
		{"outbox", outboxPageSQL, []any{int64(2000), time.Time{}, "", "", 500}, map[string]string{}},
		{"outbox events", unsettledSQL, []any{[]string{"src", "src"}, []string{"old_100", "old_101"}},
			map[string]string{"job_runs": "job_runs_event_idx"}},
	} {
		plan, nodes := planOf(t, ctx, schema, q.sql, q.args)
		used := map[string]bool{}
		for _, n := range nodes {
			idx, _ := n["Index Name"].(string)
			used[idx] = true
			rel, _ := n["Relation Name"].(string)
			if _, watched := q.reads[rel]; watched && n["Node Type"] == "Seq Scan" {
				t.Errorf("%s scans all of %s:\n%s", q.name, rel, plan)
			}
			// An event read by its id through the admin search's index
			// (migration 0019) is a key lookup as much as one by primary key.
			cond, _ := n["Index Cond"].(string)
			keyLookup := strings.HasSuffix(idx, "_pkey") ||
				(idx == "events_external_id_pattern_idx" && strings.Contains(cond, "external_id = "))
			if idx != "" && !slices.Contains(slices.Collect(maps.Values(q.reads)), idx) && !keyLookup {
				t.Errorf("%s reads through %s, want only %v or a primary key lookup:\n%s", q.name, idx, q.reads, plan)
			}
		}
		for rel, idx := range q.reads {
			if !used[idx] {
				t.Errorf("%s does not read %s through %s:\n%s", q.name, rel, idx, plan)
			}
		}
	}
}
