package dedupe

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/testkit/pgtest"
)

// TestRecordLooksUpEventsByKey: every acknowledgement runs the record
// statement, so it must find a batch's events (new or repeated) by key
// however the planner sizes the tables. A join of the batch with events
// was once planned, on a table grown since its statistics were taken (or
// never taken: the case right after a deployment, or with autovacuum
// behind), as a scan of the whole table for every batch. Checked by
// plan, for the plain and the signed-content statement, on a table of
// 30,000 events analysed when it held 10.
func TestRecordLooksUpEventsByKey(t *testing.T) {
	t.Parallel()
	schema := pgtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	execSQL(t, ctx, schema,
		`INSERT INTO events (source, external_id, payload) SELECT 'src', 'old_' || g, '{}' FROM generate_series(1, 10) g`,
		`ANALYZE events`,
		`INSERT INTO events (source, external_id, payload) SELECT 'src', 'old_' || g, '{}' FROM generate_series(11, 30000) g`)

	var cols eventColumns
	for i := range 64 {
		cols.add(&Event{Source: "src", ExternalID: fmt.Sprintf("old_%d", i*400+1), Payload: []byte(`{}`), Plan: []string{"dst"}})
	}
	signed := append(cols.args(), cols.digests, cols.windows)
	for _, q := range []struct {
		name string
		sql  string
		args []any
	}{
		{"record", recordSQL, cols.args()},
		{"record signed", recordSignedSQL, signed},
		{"repeats of unseen events", repeatsOfUnseenSQL, []any{cols.sources, cols.externalIDs}},
	} {
		plan, nodes := planOf(t, ctx, schema, q.sql, q.args)
		for _, n := range nodes {
			if n["Relation Name"] == "events" && n["Node Type"] == "Seq Scan" {
				t.Errorf("%s scans all of events:\n%s", q.name, plan)
			}
		}
	}
}
