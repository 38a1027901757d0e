package dedupe

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhookd/webhookd/internal/testkit/pgtest"
)

// TestAdminQueriesStayBoundedOnALargeTable: a page of /admin/events took
// ~3 s at 300k events (a catch-all filter the planner answered with a
// scan, and every event's state computed before the page was cut). Each
// admin statement must read events and runs through an index and touch a
// bounded number of rows, whatever the filter and however deep the
// cursor. Checked by plan (EXPLAIN ANALYZE: node types and the rows each
// node read), not by a timer, on 200,000 events with a run and a call
// each.
func TestAdminQueriesStayBoundedOnALargeTable(t *testing.T) {
	t.Parallel()
	schema := pgtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const n = 200000
	// Four busy sources and a quiet one, over 30 days; one event in a
	// thousand failed, one dead; a few still in the outbox.
	execSQL(t, ctx, schema, fmt.Sprintf(`INSERT INTO events (source, external_id, event_type, payload, received_at, last_received_at)
        SELECT CASE WHEN g %% 1000 = 0 THEN 'quiet' ELSE 'src' || (g %% 4) END, 'evt_' || g,
               CASE WHEN g %% 3 = 0 THEN 'invoice.paid' ELSE 'charge.succeeded' END, '{"amount":1}',
               now() - (g * interval '13 seconds'), now() - (g * interval '13 seconds')
        FROM generate_series(1, %d) g`, n))
	execSQL(t, ctx, schema, `INSERT INTO job_runs (key, source, external_id, destination, status, calls, attempts, max_attempts, created_at, completed_at)
        SELECT e.source || ':dst:' || e.external_id, e.source, e.external_id, 'dst',
               CASE WHEN right(e.external_id, 3) = '777' THEN 'failed' WHEN right(e.external_id, 4) = '4444' THEN 'dead' ELSE 'done' END,
               1, 0, 5, e.received_at, e.received_at
        FROM events e`)
	execSQL(t, ctx, schema, `INSERT INTO delivery_attempts (key, call, succeeded, duration_ms, created_at) SELECT key, 1, status = 'done', 3, created_at FROM job_runs`)
	execSQL(t, ctx, schema, `DELETE FROM event_outbox WHERE external_id NOT LIKE 'evt_1_'`)
	// A batch of old events that retention deleted after the last
	// ANALYZE: the statistics still hold 20,000 ids starting evt_12345
	// (11 remain), as after any purge until autovacuum analyzes again.
	execSQL(t, ctx, schema, `ALTER TABLE events SET (autovacuum_enabled = off)`)
	execSQL(t, ctx, schema, `INSERT INTO events (source, external_id, payload, received_at, last_received_at)
        SELECT 'purged', 'evt_12345_' || g, '{}', now() - interval '90 days', now() - interval '90 days' FROM generate_series(1, 20000) g`)
	execSQL(t, ctx, schema, `ANALYZE events, job_runs, delivery_attempts, event_outbox`)
	execSQL(t, ctx, schema, `DELETE FROM events WHERE source = 'purged'`)
	execSQL(t, ctx, schema, `VACUUM events`)

	deep := &position{keyset: keyset{at: time.Now().Add(-150000 * 13 * time.Second), source: "src2", externalID: "evt_150000"}}
	deepNewer := &position{keyset: deep.keyset, newer: true}
	held := []HeldDestination{{Source: "src1", Destination: "dst", Reason: "paused"}}
	since, until := time.Now().Add(-20*24*time.Hour), time.Now().Add(-10*24*time.Hour)
	type statement struct {
		name string
		sql  string
		args []any
		// most is how many rows the statement is after. A node reading
		// events, runs or calls may read at most five times that: a busy
		// source's events are read through the time index, skipping the
		// other sources' (here a quarter of the events each); a quiet
		// source's must be read through its own index.
		most int
	}
	var stmts []statement
	list := func(name string, f EventFilter, after *position, limit int) {
		f.View.Held = held
		budget := limit + 1
		if f.postFiltered() {
			budget = scanBudget(limit)
		}
		if f.IDPrefix != "" && !f.InPayload {
			stmts = append(stmts, statement{"ids by prefix " + name, prefixIDsSQL, []any{likeEscape(f.IDPrefix) + "%", prefixIDsCap + 1}, prefixIDsCap + 1})
			tx, err := schema.Pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			f, err = withPrefixIDs(ctx, tx, f)
			_ = tx.Rollback(ctx)
			if err != nil {
				t.Fatal(err)
			}
		}
		q := newEventQuery(f, after)
		stmts = append(stmts, statement{"list " + name, q.listSQL(f, budget, limit+1), q.args, budget})
		if f.postFiltered() {
			q := newEventQuery(f, after)
			stmts = append(stmts, statement{"page end " + name,
				q.scanSQL("e.received_at, e.source, e.external_id", q.arg(1)) + " OFFSET " + q.arg(budget-1), q.args, budget})
		}
		q = newEventQuery(f, nil)
		stmts = append(stmts, statement{"count " + name, q.countSQL(f, countCap), q.args, countCap})
	}
	list("newest", EventFilter{}, nil, 50)
	list("a quiet source", EventFilter{Source: "quiet"}, nil, 50)
	list("a source in a time range", EventFilter{Source: "src1", Since: since, Until: until}, nil, 1000)
	list("deep cursor", EventFilter{}, deep, 50)
	list("deep cursor in a source", EventFilter{Source: "src2"}, deep, 50)
	list("a rare state", EventFilter{State: "dead"}, nil, 50)
	list("a rare state, deep", EventFilter{State: "failed", Source: "src3"}, deep, 1000)
	list("a common state", EventFilter{State: "done", Since: since}, nil, 50)
	list("newer from a deep cursor", EventFilter{}, deepNewer, 50)
	list("newer from a deep cursor in a source", EventFilter{Source: "src2", State: "failed"}, deepNewer, 50)
	list("an id prefix", EventFilter{IDPrefix: "evt_12345"}, nil, 50)
	list("an id prefix most events have", EventFilter{IDPrefix: "evt_1"}, nil, 50)
	list("a run status", EventFilter{Status: "failed"}, nil, 50)
	list("an exact id in a source", EventFilter{Source: "src1", IDPrefix: "evt_50001"}, nil, 50)
	list("a type", EventFilter{Type: "invoice.*"}, nil, 50)
	list("a rare run status of a destination", EventFilter{Status: "dead", RunDestination: "dst", Sources: []string{"src0", "src1"}}, nil, 50)

	q := newEventQuery(EventFilter{Source: "src1", View: DestinationView{Held: held}}, nil)
	q.where = append(q.where, "e.external_id = "+q.arg("evt_50001"))
	stmts = append(stmts,
		statement{"event", eventDetailSQL, []any{"src1", "evt_50001"}, 1},
		statement{"event summary", q.withStateSQL(q.scanSQL(summaryColumns, "1")), q.args, 1},
		statement{"event runs", eventRunsSQL, []any{"src1", "evt_50001"}, 1},
		statement{"event calls", eventAttemptsSQL, []any{[]string{"src1:dst:evt_50001"}}, 1},
		statement{"reopen", reopenSQL, []any{"src1:dst:evt_50001", "by", "why"}, 1},
		statement{"lock for a forced replay", lockEventSQL, []any{"src1", "evt_50001"}, 1},
		statement{"next generation", nextGenerationSQL, []any{"src1", "evt_50001", "dst"}, 1},
	)
	// A destination's page reads the attempt log of its window (a day
	// here: every call of every destination in it, one each 13 s) through
	// the time index, and each call's run by key.
	day := time.Now().Add(-24 * time.Hour)
	const dayCalls = 24 * 3600 / 13
	// A payload search reads the events of its window (bounded by the
	// caller: admin allows at most 7 days), through the time index.
	payload := EventFilter{IDPrefix: "cus_123", InPayload: true, Since: day, View: DestinationView{Held: held}}
	pq := newEventQuery(payload, nil)
	stmts = append(stmts, statement{"payload search in a day", pq.listSQL(payload, 51, 51), pq.args, dayCalls})
	pq = newEventQuery(payload, nil)
	stmts = append(stmts, statement{"payload search count", pq.countSQL(payload, countCap), pq.args, dayCalls})
	stmts = append(stmts,
		statement{"destination figures", healthSQL, []any{"src1:dst:", day, float64(3600)}, dayCalls},
		statement{"destination failed calls", callErrorsSQL, []any{"src1:dst:", day, 10}, dayCalls},
		statement{"destination affected events", affectedEventsSQL, []any{"src1:dst:", day, 20}, dayCalls},
	)

	for _, st := range stmts {
		plan := explain(t, ctx, schema, st.sql, st.args)
		if top, ok := plan.([]any); ok && len(top) == 1 {
			if m, ok := top[0].(map[string]any); ok {
				t.Logf("%s: %.1f ms", st.name, m["Execution Time"])
			}
		}
		for _, node := range planNodes(plan) {
			rel, _ := node["Relation Name"].(string)
			if rel != "events" && rel != "job_runs" && rel != "delivery_attempts" {
				continue
			}
			if node["Node Type"] == "Seq Scan" {
				t.Errorf("%s: scans all of %s", st.name, rel)
			}
			// What a node reads: what it returns and what its filter
			// threw away.
			read := node["Actual Rows"].(float64)
			for _, k := range []string{"Rows Removed by Filter", "Rows Removed by Index Recheck"} {
				if n, ok := node[k].(float64); ok {
					read += n
				}
			}
			if rows := read * node["Actual Loops"].(float64); rows > float64(5*st.most) {
				t.Errorf("%s: reads %.0f rows of %s, want at most %d", st.name, rows, rel, 5*st.most)
			}
		}
		if t.Failed() {
			b, _ := json.MarshalIndent(plan, "", " ")
			t.Fatalf("%s: plan\n%s", st.name, b)
		}
	}
}

// explain runs sql under EXPLAIN ANALYZE, with its values, in a
// transaction set up as the Store's admin transactions are, then rolled
// back.
func explain(t *testing.T, ctx context.Context, schema *pgtest.Schema, sql string, args []any) any {
	t.Helper()
	tx, err := schema.Pool.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, adminSettingsSQL); err != nil {
		t.Fatal(err)
	}
	var out string
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+sql, args...).Scan(&out); err != nil {
		t.Fatalf("explain %s: %v", sql, err)
	}
	var plan any
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	return plan
}
