package dedupe

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/internal/testkit/pgtest"
)

// execSQL runs each statement in schema, failing the test on an error:
// the setup of the tables a plan test reads.
func execSQL(t *testing.T, ctx context.Context, schema *pgtest.Schema, statements ...string) {
	t.Helper()
	for _, sql := range statements {
		if _, err := schema.Pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
}

// planOf returns the plan Postgres makes for sql with args (EXPLAIN,
// not run), as JSON for failure messages and as its nodes.
func planOf(t *testing.T, ctx context.Context, schema *pgtest.Schema, sql string, args []any) (string, []map[string]any) {
	t.Helper()
	var plan string
	if err := schema.Pool.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+sql, args...).Scan(&plan); err != nil {
		t.Fatalf("explain: %v\n%s", err, sql)
	}
	var nodes []any
	if err := json.Unmarshal([]byte(plan), &nodes); err != nil {
		t.Fatal(err)
	}
	return plan, planNodes(nodes)
}

// planNodes flattens an EXPLAIN (FORMAT JSON) plan into its nodes.
func planNodes(v any) []map[string]any {
	var out []map[string]any
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			out = append(out, planNodes(e)...)
		}
	case map[string]any:
		if _, ok := v["Node Type"]; ok {
			out = append(out, v)
		}
		for k, e := range v {
			if k == "Plan" || k == "Plans" || strings.HasSuffix(k, "Plans") {
				out = append(out, planNodes(e)...)
			}
		}
	}
	return out
}
