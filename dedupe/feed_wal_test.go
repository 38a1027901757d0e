package dedupe

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/testkit/pgtest"
)

// BenchmarkRecordFeedWAL measures what the event feed adds to recording
// new events in what Postgres writes, which the machine's load does not
// change: WAL bytes and records, and buffers dirtied, per new event, of
// the record statement (EXPLAIN (ANALYZE, WAL, BUFFERS), rolled back) on
// a schema as migrated ("feed=on") and on one without the feed's
// defaults and index, as before migration 0023 ("feed=off"), in batches
// of 64 events with 1 KiB bodies:
//
//	go test -run '^$' -bench RecordFeedWAL -benchtime 20x ./dedupe/
func BenchmarkRecordFeedWAL(b *testing.B) {
	ctx := context.Background()
	schemas := map[string]*pgtest.Schema{"on": pgtest.New(b), "off": pgtest.New(b)}
	if _, err := schemas["off"].Pool.Exec(ctx, `ALTER TABLE events ALTER COLUMN feed_xid DROP DEFAULT, ALTER COLUMN feed_seq DROP DEFAULT;
        DROP INDEX events_feed_idx`); err != nil {
		b.Fatal(err)
	}
	payload := []byte(`{"id":"evt_bench","object":"event","type":"charge.succeeded","data":{"object":{"pad":"` +
		strings.Repeat("x", 1024-96) + `"}}}`)
	const size = 64
	for _, feed := range []string{"off", "on"} {
		b.Run("feed="+feed, func(b *testing.B) {
			schema := schemas[feed]
			var walBytes, walRecords, dirtied float64
			n, prefix := 0, "evt_"+strconv.FormatInt(time.Now().UnixNano(), 36)+"_"
			for b.Loop() {
				var cols eventColumns
				for i := range size {
					cols.add(&Event{Source: "bench", ExternalID: prefix + strconv.Itoa(n*size+i), ContentType: "application/json",
						Headers: []byte(`{"Content-Type":["application/json"]}`), Payload: payload})
				}
				// Committed, so the next batch inserts beside real rows.
				tx, err := schema.Pool.Begin(ctx)
				if err != nil {
					b.Fatal(err)
				}
				var out string
				if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, WAL, BUFFERS, FORMAT JSON) "+recordSQL, cols.args()...).Scan(&out); err != nil {
					b.Fatal(err)
				}
				if err := tx.Commit(ctx); err != nil {
					b.Fatal(err)
				}
				var plan []struct {
					Plan map[string]any `json:"Plan"`
				}
				if err := json.Unmarshal([]byte(out), &plan); err != nil || len(plan) != 1 {
					b.Fatalf("plan: %v", err)
				}
				walBytes += plan[0].Plan["WAL Bytes"].(float64)
				walRecords += plan[0].Plan["WAL Records"].(float64)
				dirtied += plan[0].Plan["Shared Dirtied Blocks"].(float64)
				n++
			}
			events := float64(n * size)
			b.ReportMetric(walBytes/events, "WAL-B/event")
			b.ReportMetric(walRecords/events, "WAL-records/event")
			b.ReportMetric(dirtied/events, "dirtied/event")
		})
	}
}
