package dedupe

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhookd/webhookd/internal/testkit/pgtest"
)

// deliveryStatements are the statements every delivery (or every
// recovery pass, or every read of listen's feed) runs, and retention's
// batches, with how many parameters each takes.
// The reconciler's settle and retention's deletes are planned at every
// run (SettleEvents, deleteBatch), so only their plans on grown tables
// are checked.
var deliveryStatements = []struct {
	name    string
	sql     string
	params  int
	generic bool
}{
	{"claim", claimSQL, 7, true},
	{"finish", finishSQL, 15, true},
	{"sweep", sweepSQL, 1, true},
	{"settle", settleSQL, 2, false},
	{"fifo head", headSQL, 8, true},
	{"fifo release", releaseBehindSQL, 4, true},
	{"version advance", advanceVersionSQL, 7, true},
	{"version state", versionStateSQL, 4, true},
	{"version release", releaseVersionSQL, 4, true},
	{"due runs", dueRunsSQL, 4, true},
	{"outbox page", outboxPageSQL, 5, true},
	{"outbox events", unsettledSQL, 2, true},
	{"feed scan", feedScanSQL, 3, true},
	{"feed fetch", feedFetchSQL, 2, true},
	{"retain attempts", retainAttemptsSQL, 2, false},
	{"retain runs", retainRunsSQL, 2, false},
	{"retain events", retainEventsSQL, 2, false},
	{"retain hand-offs", retainHandOffsSQL, 2, false},
}

// deliveryTables are the tables that grow with every event: a delivery
// statement must never read one of them whole.
var deliveryTables = []string{"events", "event_outbox", "job_runs", "delivery_attempts"}

// TestDeliveryStatementsFindRowsByKey: the claim and the finish run for
// every delivery (and in order modes the head or version statements), the
// sweep on every recovery pass, and retention in batches over the
// largest tables, so each must find its rows by key however the planner
// sized the tables. A pool keeps the plan it made at a statement's
// first runs (a generic plan, once Postgres prefers it), and with
// autovacuum off or behind nothing makes it plan again: plans made right
// after a deployment, on empty tables, joined the batch with job_runs
// and delivery_attempts by hashing the whole table, on every batch,
// while the tables grew (delivery cost rose with the table's size).
// Checked on generic plans made on empty tables, and on plans made after
// statistics taken at 10 rows with 30,000 there now.
func TestDeliveryStatementsFindRowsByKey(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("generic plans on empty tables", func(t *testing.T) {
		schema := pgtest.New(t)
		conn, err := pgx.Connect(ctx, schema.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
			t.Fatal(err)
		}
		for i, q := range deliveryStatements {
			if !q.generic {
				continue
			}
			name := "delivery_" + string(rune('a'+i))
			if _, err := conn.Exec(ctx, "PREPARE "+name+" AS "+q.sql, pgx.QueryExecModeSimpleProtocol); err != nil {
				t.Fatalf("prepare %s: %v", q.name, err)
			}
			var plan string
			nulls := strings.TrimSuffix(strings.Repeat("NULL, ", q.params), ", ")
			if err := conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) EXECUTE "+name+"("+nulls+")").Scan(&plan); err != nil {
				t.Fatalf("explain %s: %v", q.name, err)
			}
			var nodes []any
			if err := json.Unmarshal([]byte(plan), &nodes); err != nil {
				t.Fatal(err)
			}
			checkNoTableScan(t, q.name, plan, planNodes(nodes))
		}
	})

	t.Run("statistics taken at 10 rows", func(t *testing.T) {
		schema := pgtest.New(t)
		grow := func(from, to int) {
			t.Helper()
			execSQL(t, ctx, schema,
				`INSERT INTO events (source, external_id, payload, plan, order_entity)
				 SELECT 'src', 'old_' || g, '{}', '{dst}', 'e' || g % 100 FROM generate_series(`+strconv.Itoa(from)+`, `+strconv.Itoa(to)+`) g`,
				`INSERT INTO job_runs (key, source, external_id, destination, status, calls, attempts, max_attempts, completed_at)
				 SELECT 'src:dst:old_' || g, 'src', 'old_' || g, 'dst', 'done', 1, 0, 5, now() FROM generate_series(`+strconv.Itoa(from)+`, `+strconv.Itoa(to)+`) g`,
				// A backlog recorded over time, oldest first (one statement's
				// rows would share one now(), which no backlog does).
				`INSERT INTO event_outbox (source, external_id, received_at)
				 SELECT 'src', 'old_' || g, now() - interval '1 hour' + g * interval '1 millisecond' FROM generate_series(`+strconv.Itoa(from)+`, `+strconv.Itoa(to)+`) g`,
				`INSERT INTO delivery_attempts (key, call, succeeded, duration_ms, state, outcome)
				 SELECT 'src:dst:old_' || g, 1, true, 1, 'finished', 'done' FROM generate_series(`+strconv.Itoa(from)+`, `+strconv.Itoa(to)+`) g`)
		}
		grow(1, 10)
		execSQL(t, ctx, schema, `ANALYZE events, event_outbox, job_runs, delivery_attempts`)
		grow(11, 30000)

		var keys, sources, ids, dests, outcomes, texts []string
		var ints []int32
		var floats []float64
		var longs []int64
		var bools []bool
		var bytes [][]byte
		for i := range 64 {
			id := "old_" + strconv.Itoa(i*400+1)
			keys, sources, ids, dests = append(keys, "src:dst:"+id), append(sources, "src"), append(ids, id), append(dests, "dst")
			outcomes, texts = append(outcomes, string(OutcomeRetry)), append(texts, "")
			ints, floats, longs = append(ints, 1), append(floats, 1), append(longs, 1000)
			bools, bytes = append(bools, i%2 == 0), append(bytes, nil)
		}
		args := map[string][]any{
			"claim":            {keys, sources, ids, dests, ints, ints, longs},
			"finish":           {keys, ints, outcomes, ints, texts, texts, floats, longs, bools, longs, texts, bytes, bools, texts, bytes},
			"sweep":            {100},
			"settle":           {sources, ids},
			"fifo head":        {"src", "dst", "e1", "old_401", true, int64(1000), "src:dst:old_401", int32(0)},
			"fifo release":     {"src", "dst", "e1", OrderHoldPrefix + "old_401"},
			"version advance":  {"src", "dst", "e1", "5", "src:dst:old_401", int64(1000), int32(1)},
			"version state":    {"src", "dst", "e1", "5"},
			"version release":  {"src", "dst", "e1", "src:dst:old_401"},
			"due runs":         {int64(1000), time.Time{}, "", 100},
			"outbox page":      {int64(1000), time.Time{}, "", "", 500},
			"outbox events":    {sources, ids},
			"feed scan":        {"1", int64(0), 100},
			"feed fetch":       {sources, ids},
			"retain attempts":  {time.Now().Add(-time.Hour), 1000},
			"retain runs":      {time.Now().Add(-time.Hour), 1000},
			"retain events":    {time.Now().Add(-time.Hour), 1000},
			"retain hand-offs": {time.Now().Add(-time.Hour), 1000},
		}
		for _, q := range deliveryStatements {
			plan, nodes := planOf(t, ctx, schema, q.sql, args[q.name])
			checkNoTableScan(t, q.name, plan, nodes)
		}
	})
}

// checkNoTableScan fails the test if a plan reads one of deliveryTables
// whole.
func checkNoTableScan(t *testing.T, name, plan string, nodes []map[string]any) {
	t.Helper()
	for _, n := range nodes {
		rel, _ := n["Relation Name"].(string)
		for _, table := range deliveryTables {
			if rel == table && n["Node Type"] == "Seq Scan" {
				t.Errorf("%s scans all of %s:\n%s", name, rel, plan)
			}
		}
	}
}

// TestRareStatementsArePlannedAtEveryRun: the reconciler's settle and
// retention's deletes run on tables that swing from empty to millions,
// so each is planned for the table as it is at every run and never kept
// on a connection as a prepared statement, whose plan (a generic one,
// after a few runs) would be the one made while the table was nearly
// empty.
func TestRareStatementsArePlannedAtEveryRun(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	schema := pgtest.New(t)
	s := New(schema.Pool)
	refs := []EventRef{{Source: "src", ExternalID: "evt_1"}}
	for range 8 {
		if err := s.SettleEvents(ctx, refs); err != nil {
			t.Fatal(err)
		}
		if _, err := s.RunRetention(ctx, RetentionOptions{Retention: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	rare := []string{settleSQL, retainAttemptsSQL, retainRunsSQL, retainEventsSQL, retainHandOffsSQL}
	for _, c := range schema.Pool.AcquireAllIdle(ctx) {
		var kept int
		err := c.QueryRow(ctx, `SELECT count(*) FROM pg_prepared_statements WHERE statement = ANY ($1)`, rare).Scan(&kept)
		c.Release()
		if err != nil {
			t.Fatal(err)
		}
		if kept > 0 {
			t.Errorf("a connection keeps %d of the rare statements prepared", kept)
		}
	}
}
