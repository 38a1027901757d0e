package dedupe_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/testkit/pgtest"
)

// Benchmarks against real Postgres (TEST_DATABASE_URL). Figures depend on
// the machine and on what else runs on it; docs/performance.md says how
// they were taken. Run with:
//
//	go test -run '^$' -bench . -benchtime 3s ./dedupe/

// benchPayload is a 1 KiB Stripe-like body.
var benchPayload = []byte(`{"id":"evt_bench","object":"event","type":"charge.succeeded","data":{"object":{"pad":"` +
	string(bytes.Repeat([]byte("x"), 1024-96)) + `"}}}`)

var benchHeaders = []byte(`{"Content-Type":["application/json"],"Stripe-Signature":["t=1700000000,v1=00"]}`)

func benchEvents(prefix string, from, n int) []dedupe.Event {
	evs := make([]dedupe.Event, n)
	for i := range evs {
		evs[i] = dedupe.Event{Source: "bench", ExternalID: prefix + strconv.Itoa(from+i),
			ContentType: "application/json", Headers: benchHeaders, Payload: benchPayload}
	}
	return evs
}

// BenchmarkRecordBatch measures one multi-row INSERT … ON CONFLICT
// statement (one commit) per op, for new events and for repeats of stored
// ones. events/s is the batch's rows over the elapsed time with one
// statement in flight; ns/event is the statement's time per row.
func BenchmarkRecordBatch(b *testing.B) {
	schema := pgtest.New(b)
	ctx := context.Background()
	for _, kind := range []string{"new", "repeat"} {
		for _, size := range []int{1, 16, 64, 256} {
			b.Run(fmt.Sprintf("%s/batch=%d", kind, size), func(b *testing.B) {
				prefix := fmt.Sprintf("evt_%s_%d_%d_", kind, size, time.Now().UnixNano())
				if kind == "repeat" {
					if _, err := dedupe.RecordBatch(ctx, schema.Pool, benchEvents(prefix, 0, size)); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					from := i * size
					if kind == "repeat" {
						from = 0
					}
					evs := benchEvents(prefix, from, size)
					recs, err := dedupe.RecordBatch(ctx, schema.Pool, evs)
					if err != nil {
						b.Fatal(err)
					}
					if recs[0].Inserted != (kind == "new") {
						b.Fatalf("%s event: inserted = %v", kind, recs[0].Inserted)
					}
					i++
				}
				b.ReportMetric(float64(i*size)/b.Elapsed().Seconds(), "events/s")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i*size), "ns/event")
			})
		}
	}
}

// BenchmarkBatcher measures group commit as the gateway uses it: many
// goroutines call Record at once (64 per GOMAXPROCS) and share statements.
// One op is one event.
func BenchmarkBatcher(b *testing.B) {
	schema := pgtest.New(b)
	bt := dedupe.NewBatcher(schema.Pool, dedupe.BatcherConfig{})
	defer bt.Close()
	prefix := fmt.Sprintf("evt_batcher_%d_", time.Now().UnixNano())
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(64)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
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
}

// BenchmarkClaimFinish measures what a worker does in Postgres per job:
// the claim (one INSERT … ON CONFLICT … RETURNING joined with the event)
// and the finish (the conditional UPDATE plus the delivery_attempts row).
func BenchmarkClaimFinish(b *testing.B) {
	schema := pgtest.New(b)
	store := dedupe.New(schema.Pool)
	ctx := context.Background()
	prefix := recordBenchEvents(b, schema, "evt_claim")
	result := []byte(`{"status_code":200}`)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id := prefix + strconv.Itoa(i)
		key := "bench:sink:" + id
		c, err := store.Claim(ctx, dedupe.ClaimRequest{Key: key, Source: "bench", ExternalID: id, Destination: "sink",
			Generation: 1, MaxAttempts: 20, Lease: 2 * time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		if c.Outcome != dedupe.Claimed {
			b.Fatalf("claim of %s: %v", key, c.Outcome)
		}
		if _, err := store.Finish(ctx, key, dedupe.Finish{Outcome: dedupe.OutcomeDone, Call: c.Call, Called: true,
			StatusCode: 200, Result: result, Duration: time.Millisecond}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkRunBatcher claims and finishes runs from 128 goroutines through
// one RunBatcher, as the worker does.
func BenchmarkRunBatcher(b *testing.B) {
	schema := pgtest.New(b)
	store := dedupe.New(schema.Pool)
	runs := dedupe.NewRunBatcher(store, dedupe.BatcherConfig{MaxBatch: 128, MaxInFlight: 1})
	defer runs.Close()
	ctx := context.Background()
	prefix := recordBenchEvents(b, schema, "evt_runs")
	result := []byte(`{"status_code":200}`)
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for range 128 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				id := prefix + strconv.FormatInt(i, 10)
				key := "bench:sink:" + id
				c, err := runs.Claim(ctx, dedupe.ClaimRequest{Key: key, Source: "bench", ExternalID: id, Destination: "sink",
					Generation: 1, MaxAttempts: 20, Lease: 2 * time.Minute})
				if err != nil || c.Outcome != dedupe.Claimed {
					b.Errorf("claim of %s: %v %v", key, c.Outcome, err)
					return
				}
				if _, err := runs.Finish(ctx, key, dedupe.Finish{Outcome: dedupe.OutcomeDone, Call: c.Call, Called: true,
					StatusCode: 200, Result: result, Duration: time.Millisecond}); err != nil {
					b.Errorf("finish of %s: %v", key, err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// recordBenchEvents records b.N events to claim, ids <prefix>_<time>_<n>,
// and returns the ids' common prefix.
func recordBenchEvents(b *testing.B, schema *pgtest.Schema, prefix string) string {
	b.Helper()
	prefix = fmt.Sprintf("%s_%d_", prefix, time.Now().UnixNano())
	for from := 0; from < b.N; from += 256 {
		if _, err := dedupe.RecordBatch(context.Background(), schema.Pool, benchEvents(prefix, from, min(256, b.N-from))); err != nil {
			b.Fatal(err)
		}
	}
	return prefix
}

// BenchmarkRecoveryQueries measures what one recovery pass asks of
// Postgres on a large table: the sweep, the walk of due runs and the walk
// of the outbox, when nothing is unsettled ("idle", every pass on every
// process) and per batch of 500 when 10,000 runs are due and 10,000
// events wait in the outbox ("backlog"). WEBHOOKD_BENCH_ROWS settled
// events and runs (default 1,000,000) are loaded first, with the
// outbox's churn left for vacuum, as a busy system leaves them.
func BenchmarkRecoveryQueries(b *testing.B) {
	rows := 1_000_000
	if s := os.Getenv("WEBHOOKD_BENCH_ROWS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			b.Fatal(err)
		}
		rows = n
	}
	schema := pgtest.New(b)
	store := dedupe.New(schema.Pool)
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		b.Helper()
		if _, err := schema.Pool.Exec(ctx, sql, args...); err != nil {
			b.Fatal(err)
		}
	}
	exec(`INSERT INTO events (source, external_id, payload) SELECT 'src', 'old_' || g, $2 FROM generate_series(1, $1::int) g`, rows, benchPayload)
	exec(`INSERT INTO job_runs (key, source, external_id, destination, status, calls, attempts, max_attempts, completed_at, result)
        SELECT 'src:dst:old_' || g, 'src', 'old_' || g, 'dst', 'done', 1, 0, 5, now(), '{"status_code":200}' FROM generate_series(1, $1::int) g`, rows)
	exec(`DELETE FROM event_outbox`)
	exec(`VACUUM ANALYZE events, job_runs, event_outbox`)

	pass := func(b *testing.B, batch int) {
		b.Helper()
		if _, err := store.SweepExpired(ctx, batch); err != nil {
			b.Fatal(err)
		}
		var runCursor dedupe.RunCursor
		for {
			runs, next, err := store.DueRuns(ctx, runCursor, 2*time.Second, batch)
			if err != nil {
				b.Fatal(err)
			}
			if len(runs) < batch {
				break
			}
			runCursor = next
		}
		var outboxCursor dedupe.OutboxCursor
		for {
			entries, next, err := store.OutboxPage(ctx, outboxCursor, 2*time.Second, batch)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := store.UnsettledEvents(ctx, entries); err != nil {
				b.Fatal(err)
			}
			if len(entries) < batch {
				break
			}
			outboxCursor = next
		}
	}
	b.Run("idle", func(b *testing.B) {
		for b.Loop() {
			pass(b, 500)
		}
	})
	b.Run("backlog", func(b *testing.B) {
		exec(`UPDATE job_runs SET status = 'failed', retry_at = now() - interval '1 minute' WHERE external_id IN (
            SELECT 'old_' || g FROM generate_series(1, 10000) g)`)
		exec(`INSERT INTO event_outbox (source, external_id, received_at)
            SELECT 'src', 'old_' || g, now() - interval '1 minute' FROM generate_series(10001, 20000) g`)
		exec(`ANALYZE job_runs, event_outbox`)
		for b.Loop() {
			pass(b, 500)
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/40, "µs/batch")
	})
}

// BenchmarkRecordIssueFailure measures what a failed outcome adds to a
// delivery: the one upsert into its open issue, with a new affected event
// each time (the bounded count of listed events grows to 10,000), on 8
// connections at once, all into the same issue row.
func BenchmarkRecordIssueFailure(b *testing.B) {
	schema := pgtest.New(b)
	store := dedupe.New(schema.Pool)
	ctx := context.Background()
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(4) // 2 cores x 4 = 8 goroutines, the test pool's size
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := "evt_" + strconv.FormatInt(n.Add(1), 10)
			if _, err := store.RecordIssueFailure(ctx, dedupe.IssueFailure{Source: "bench", Destination: "sink", Cause: "500", ExternalIDs: []string{id}}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "failures/s")
}
