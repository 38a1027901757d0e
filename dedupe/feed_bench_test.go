package dedupe_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/testkit/pgtest"
)

// BenchmarkRecordFeedCost measures what the event feed (migration 0023:
// two column defaults and an index entry per new event) adds to the ack
// path: the same record statements on a schema as migrated ("feed=on")
// and on one whose feed defaults and index are dropped, as before 0023
// ("feed=off"). "batch=N" is RecordBatch of N new events per op, one
// statement in flight; "batcher" is group commit from 64 goroutines per
// GOMAXPROCS, as the gateway records. Alternate the two with -count to
// read a difference on a shared machine:
//
//	go test -run '^$' -bench RecordFeedCost -benchtime 3s -count 5 ./dedupe/
func BenchmarkRecordFeedCost(b *testing.B) {
	ctx := context.Background()
	schemas := map[string]*pgtest.Schema{"on": pgtest.New(b), "off": pgtest.New(b)}
	if _, err := schemas["off"].Pool.Exec(ctx, `ALTER TABLE events ALTER COLUMN feed_xid DROP DEFAULT, ALTER COLUMN feed_seq DROP DEFAULT;
        DROP INDEX events_feed_idx`); err != nil {
		b.Fatal(err)
	}
	for _, size := range []int{1, 64, 256} {
		for _, feed := range []string{"off", "on"} {
			b.Run(fmt.Sprintf("batch=%d/feed=%s", size, feed), func(b *testing.B) {
				prefix := fmt.Sprintf("evt_%d_%d_", size, time.Now().UnixNano())
				i := 0
				for b.Loop() {
					if _, err := dedupe.RecordBatch(ctx, schemas[feed].Pool, benchEvents(prefix, i*size, size)); err != nil {
						b.Fatal(err)
					}
					i++
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i*size), "ns/event")
			})
		}
	}
	for _, feed := range []string{"off", "on"} {
		b.Run("batcher/feed="+feed, func(b *testing.B) {
			bt := dedupe.NewBatcher(schemas[feed].Pool, dedupe.BatcherConfig{MaxInFlight: 2, Linger: time.Millisecond})
			defer bt.Close()
			prefix := fmt.Sprintf("evt_batcher_%d_", time.Now().UnixNano())
			var next atomic.Int64
			b.SetParallelism(64)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					ev := dedupe.Event{Source: "bench", ExternalID: prefix + strconv.FormatInt(next.Add(1), 10),
						ContentType: "application/json", Headers: benchHeaders, Payload: benchPayload}
					if _, err := bt.Record(ctx, ev); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
