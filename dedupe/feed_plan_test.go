package dedupe

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/testkit/pgtest"
)

// TestFeedQueriesStayBoundedOnALargeTable: every statement of the event
// feed reads events through an index and a bounded number of rows,
// however deep the cursor, on 60,000 events recorded in 60 transactions
// over a day. Checked by plan (EXPLAIN ANALYZE), not by a timer.
func TestFeedQueriesStayBoundedOnALargeTable(t *testing.T) {
	t.Parallel()
	schema := pgtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for batch := range 60 {
		execSQL(t, ctx, schema, fmt.Sprintf(`INSERT INTO events (source, external_id, event_type, payload, received_at, last_received_at)
            SELECT CASE WHEN g %% 100 = 0 THEN 'quiet' ELSE 'busy' END, 'evt_%d_' || g, 'invoice.paid', '{"amount":1}',
                   now() - ((%d * 1000 + g) * interval '1 second'), now()
            FROM generate_series(1, 1000) g`, batch, 60-batch))
	}
	execSQL(t, ctx, schema, `ANALYZE events`)
	var deepXID string
	if err := schema.Pool.QueryRow(ctx, `SELECT feed_xid::text FROM events ORDER BY feed_xid, feed_seq OFFSET 30000 LIMIT 1`).Scan(&deepXID); err != nil {
		t.Fatal(err)
	}
	if _, err := strconv.ParseUint(deepXID, 10, 64); err != nil {
		t.Fatal(err)
	}
	for _, st := range []struct {
		name string
		sql  string
		args []any
		most int
	}{
		{"scan from the start", feedScanSQL, []any{"0", int64(0), feedScan}, feedScan},
		{"scan from a deep cursor", feedScanSQL, []any{deepXID, int64(0), feedScan}, feedScan},
		{"fetch a page", feedFetchSQL, []any{[]string{"busy", "quiet"}, []string{"evt_7_1", "evt_7_100"}}, 2},
		{"since a time", feedSinceSQL, []any{time.Now().Add(-12 * time.Hour)}, 120},
		{"backlog of a quiet source", feedBacklogSQL, []any{deepXID, int64(0), "quiet", "", 10000}, 10002},
		{"backlog, capped", feedBacklogSQL, []any{"0", int64(0), "", "invoice.%", 10000}, 10002},
	} {
		plan := explain(t, ctx, schema, st.sql, st.args)
		for _, node := range planNodes(plan) {
			if rel, _ := node["Relation Name"].(string); rel != "events" {
				continue
			}
			if node["Node Type"] == "Seq Scan" {
				t.Errorf("%s: scans all of events", st.name)
			}
			read := node["Actual Rows"].(float64)
			if n, ok := node["Rows Removed by Filter"].(float64); ok {
				read += n
			}
			if rows := read * node["Actual Loops"].(float64); rows > float64(st.most) {
				t.Errorf("%s: reads %.0f rows of events, want at most %d", st.name, rows, st.most)
			}
		}
		if t.Failed() {
			b, _ := json.MarshalIndent(plan, "", " ")
			t.Fatalf("%s: plan\n%s", st.name, b)
		}
	}
}
