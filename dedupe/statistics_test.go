package dedupe

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/testkit/pgtest"
)

// TestAnalyzeGrownTables: tables analyzed while empty (a new deployment,
// or a purge) and then grown past minRowsToAnalyze are analyzed again,
// once: their statistics count the rows, and a second check finds
// nothing to do.
func TestAnalyzeGrownTables(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	schema := pgtest.New(t)
	s := New(schema.Pool)
	execSQL(t, ctx, schema, `ANALYZE events, event_outbox, job_runs`)
	const n = 3 * minRowsToAnalyze
	events := make([]Event, 0, n)
	for i := range n {
		events = append(events, Event{Source: "src", ExternalID: "evt_" + strconv.Itoa(i), Payload: []byte(`{}`), Plan: []string{"dst"}})
	}
	if _, err := RecordBatch(ctx, schema.Pool, events); err != nil {
		t.Fatal(err)
	}
	// The counts reach the statistics views a moment after the commit.
	var analyzed []string
	for deadline := time.Now().Add(20 * time.Second); !slices.Contains(analyzed, "events") && time.Now().Before(deadline); {
		got, err := s.AnalyzeGrownTables(ctx)
		if err != nil {
			t.Fatal(err)
		}
		analyzed = append(analyzed, got...)
		time.Sleep(200 * time.Millisecond)
	}
	if !slices.Contains(analyzed, "events") || !slices.Contains(analyzed, "event_outbox") || slices.Contains(analyzed, "job_runs") {
		t.Fatalf("analyzed %v, want events and event_outbox (grown), not job_runs (still empty)", analyzed)
	}
	if got := schema.Int(t, `SELECT reltuples::int FROM pg_class WHERE oid = 'events'::regclass`); got != n {
		t.Errorf("events' statistics count %d rows, want %d", got, n)
	}
	again, err := s.AnalyzeGrownTables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(again, "events") {
		t.Errorf("analyzed events again with no change since: %v", again)
	}
}
