package jobs_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/internal/testkit/redistest"
	"github.com/webhookd/webhookd/jobs"
)

// These tests run the handler behind a real Asynq server on the test's
// own Redis DB, so Asynq's retry, archive and IsFailure decisions are part
// of what is tested.

func TestQueueRateLimitHoldDoesNotSpendAttempts(t *testing.T) {
	t.Parallel()
	d := newDestination(t, func(n int, _ *http.Request, w http.ResponseWriter) {
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	// max_attempts 1: had the 429 counted, the run would be dead.
	b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: d.URL, MaxAttempts: 1}})
	q := b.startWorker(t)
	b.record(t, "evt_1", body)
	p := jobs.DeliverPayload{Source: "src", EventID: "evt_1", Destination: "dst"}
	if err := q.enqueuer.Enqueue(testCtx(t), p); err != nil {
		t.Fatal(err)
	}
	pipelinetest.Eventually(t, 15*time.Second, "the run to be done", func() bool { return b.status(t, p.Key()) == dedupe.StatusDone })
	calls := d.Calls()
	if len(calls) != 2 || calls[0].Key != p.Key() || calls[1].Key != p.Key() || calls[0].Attempt != "1" || calls[1].Attempt != "2" {
		t.Fatalf("destination saw %+v, want 2 calls with the key, attempts 1 and 2", calls)
	}
	if gap := calls[1].At.Sub(calls[0].At); gap < time.Second {
		t.Fatalf("retried after %s, want at least the Retry-After of 1s", gap)
	}
	if r := b.run(t, p.Key()); r.Attempts != 0 || r.Calls != 2 {
		t.Fatalf("run %+v, want 0 attempts (a hold is not one) after 2 calls", r)
	}
}

func TestQueuePermanentFailureAndDead(t *testing.T) {
	t.Parallel()

	t.Run("400FailsAfterOneCall", func(t *testing.T) {
		t.Parallel()
		d := newDestination(t, status(http.StatusBadRequest))
		b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: d.URL, MaxAttempts: 5}})
		q := b.startWorker(t)
		b.record(t, "evt_1", body)
		p := jobs.DeliverPayload{Source: "src", EventID: "evt_1", Destination: "dst"}
		if err := q.enqueuer.Enqueue(testCtx(t), p); err != nil {
			t.Fatal(err)
		}
		waitArchived(t, q, p.Key())
		if r := b.run(t, p.Key()); r.Status != dedupe.StatusFailed || !r.Permanent || r.Calls != 1 {
			t.Fatalf("run %+v, want failed permanently after 1 call", r)
		}
		time.Sleep(300 * time.Millisecond)
		if n := len(d.Calls()); n != 1 {
			t.Fatalf("destination called %d times, want 1", n)
		}
	})

	t.Run("500AlwaysIsDeadAfterExactlyMaxAttempts", func(t *testing.T) {
		t.Parallel()
		d := newDestination(t, status(http.StatusInternalServerError))
		b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: d.URL, MaxAttempts: 3}})
		q := b.startWorker(t)
		b.record(t, "evt_1", body)
		p := jobs.DeliverPayload{Source: "src", EventID: "evt_1", Destination: "dst"}
		if err := q.enqueuer.Enqueue(testCtx(t), p); err != nil {
			t.Fatal(err)
		}
		waitArchived(t, q, p.Key())
		if r := b.run(t, p.Key()); r.Status != dedupe.StatusDead || r.Attempts != 3 || r.Calls != 3 {
			t.Fatalf("run %+v, want dead after 3 attempts and 3 calls", r)
		}
		time.Sleep(300 * time.Millisecond)
		calls := d.Calls()
		if len(calls) != 3 {
			t.Fatalf("destination called %d times, want exactly 3", len(calls))
		}
		for i, c := range calls {
			if c.Key != p.Key() || c.Attempt != strconv.Itoa(i+1) {
				t.Fatalf("call %d: key %q attempt %q", i+1, c.Key, c.Attempt)
			}
		}
	})
}

// waitArchived waits until Asynq archived the task: it will not run again.
func waitArchived(t *testing.T, q *queue, key string) {
	t.Helper()
	pipelinetest.Eventually(t, 20*time.Second, "task "+key+" archived", func() bool {
		info, err := q.insp.GetTaskInfo(q.redis.Queue, key)
		return err == nil && info.State == asynq.TaskStateArchived
	})
}

func TestQueueOrdering(t *testing.T) {
	t.Parallel()

	t.Run("OlderAfterNewerIsSkipped", func(t *testing.T) {
		t.Parallel()
		d := newDestination(t, status(200))
		b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: d.URL}})
		q := b.startWorker(t)
		b.record(t, "evt_v2", `{"v":2}`, "cus_1", "2")
		b.record(t, "evt_v1", `{"v":1}`, "cus_1", "1")
		p2 := jobs.DeliverPayload{Source: "src", EventID: "evt_v2", Destination: "dst"}
		p1 := jobs.DeliverPayload{Source: "src", EventID: "evt_v1", Destination: "dst"}
		if err := q.enqueuer.Enqueue(testCtx(t), p2); err != nil {
			t.Fatal(err)
		}
		pipelinetest.Eventually(t, 10*time.Second, "v2 done", func() bool { return b.status(t, p2.Key()) == dedupe.StatusDone })
		if err := q.enqueuer.Enqueue(testCtx(t), p1); err != nil {
			t.Fatal(err)
		}
		pipelinetest.Eventually(t, 10*time.Second, "v1 skipped", func() bool { return b.status(t, p1.Key()) == dedupe.StatusSkippedStale })
		calls := d.Calls()
		if len(calls) != 1 || calls[0].EventID != "evt_v2" {
			t.Fatalf("destination saw %+v, want only v2", calls)
		}
	})

	// Many entities, each with several versions enqueued at once on a
	// worker with 8 slots: the destination never sees an older version of
	// an entity after a newer one, and the newest always arrives.
	t.Run("ConcurrentNeverOlderAfterNewer", func(t *testing.T) {
		t.Parallel()
		const entities, versions = 15, 4
		var (
			mu     sync.Mutex
			newest = map[string]int{}
			bad    []string
		)
		d := newDestination(t, func(_ int, r *http.Request, w http.ResponseWriter) {
			time.Sleep(time.Duration(rand.IntN(15)) * time.Millisecond) // widen the window
			w.WriteHeader(200)
		})
		b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: d.URL}})
		q := b.startWorker(t)
		var ps []jobs.DeliverPayload
		for e := range entities {
			for v := 1; v <= versions; v++ {
				id := fmt.Sprintf("evt_e%d_v%d", e, v)
				b.record(t, id, fmt.Sprintf(`{"entity":"e%d","version":%d}`, e, v), fmt.Sprintf("e%d", e), strconv.Itoa(v))
				ps = append(ps, jobs.DeliverPayload{Source: "src", EventID: id, Destination: "dst"})
			}
		}
		rand.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
		var wg sync.WaitGroup
		for _, p := range ps {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := q.enqueuer.Enqueue(testCtx(t), p); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		pipelinetest.Eventually(t, 60*time.Second, "every run settled", func() bool {
			return b.schema.Int(t, `SELECT count(*) FROM job_runs WHERE status IN ('done', 'skipped_stale')`) == entities*versions
		})
		// Arrival order at the destination, per entity.
		for _, c := range d.Calls() {
			var e, v int
			if _, err := fmt.Sscanf(c.EventID, "evt_e%d_v%d", &e, &v); err != nil {
				t.Fatal(err)
			}
			k := strconv.Itoa(e)
			mu.Lock()
			if v < newest[k] {
				bad = append(bad, fmt.Sprintf("entity %d: version %d after %d", e, v, newest[k]))
			}
			newest[k] = max(newest[k], v)
			mu.Unlock()
		}
		if len(bad) > 0 {
			t.Fatalf("older after newer: %v", bad)
		}
		for e := range entities {
			if newest[strconv.Itoa(e)] != versions {
				t.Fatalf("entity %d: newest forwarded %d, want %d", e, newest[strconv.Itoa(e)], versions)
			}
		}
		if n := b.schema.Int(t, `SELECT count(*) FROM delivery_attempts WHERE succeeded GROUP BY key ORDER BY 1 DESC LIMIT 1`); n != 1 {
			t.Fatalf("a key was delivered %d times", n)
		}
	})
}

func TestReconcilerRecoversAKilledRunWithTheSameKey(t *testing.T) {
	t.Parallel()
	d := newDestination(t, status(200))
	b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: d.URL}, lease: time.Second})
	q := b.startWorker(t)
	b.record(t, "evt_1", body)
	p := jobs.DeliverPayload{Source: "src", EventID: "evt_1", Destination: "dst"}
	// A worker claimed the key and died without a trace in the queue.
	if _, err := b.store.Claim(testCtx(t), dedupe.ClaimRequest{Key: p.Key(), Source: "src", ExternalID: "evt_1",
		Destination: "dst", Generation: 1, MaxAttempts: 5, Lease: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	reg := prometheus.NewRegistry()
	m := jobs.NewMetrics(reg)
	rec := jobs.NewReconciler(b.store, q.enqueuer, jobs.ReconcilerConfig{Lease: time.Second, Logger: testLogger(t), Metrics: m})
	rep, err := rec.Pass(testCtx(t))
	if err != nil || !rep.Ran || rep.Swept != 1 || rep.Actions["written"] != 1 {
		t.Fatalf("pass: %+v, %v; want 1 run swept and its task written", rep, err)
	}
	pipelinetest.Eventually(t, 10*time.Second, "the retried run to be done", func() bool { return b.status(t, p.Key()) == dedupe.StatusDone })
	calls := d.Calls()
	if len(calls) != 1 || calls[0].Key != p.Key() || calls[0].Attempt != "2" {
		t.Fatalf("destination saw %+v, want one call with the same key as attempt 2", calls)
	}
	if r := b.run(t, p.Key()); r.Attempts != 1 {
		t.Fatalf("run %+v, want the crash counted as 1 attempt", r)
	}
	if v := metricValue(t, reg, "webhookd_sweeper_resets_total", "status", dedupe.StatusFailed); v != 1 {
		t.Fatalf("sweeper reset metric %v, want 1", v)
	}
	if v := metricValue(t, reg, "webhookd_recovery_tasks_total", "action", "written"); v != 1 {
		t.Fatalf("recovery written metric %v, want 1", v)
	}
	// The claimed call that never finished is one of unknown outcome.
	if n := b.schema.Int(t, `SELECT count(*) FROM delivery_attempts WHERE key = $1 AND call = 1 AND state = 'unknown'`, p.Key()); n != 1 {
		t.Fatalf("%d unknown-outcome calls for the killed claim, want 1", n)
	}
}

// TestReconcilerHandsOffUnclaimedEvents: events recorded with no fast path
// are enqueued by a pass and delivered; their claims take them out of the
// outbox, so the next pass has nothing to check or settle.
func TestReconcilerHandsOffUnclaimedEvents(t *testing.T) {
	t.Parallel()
	d := newDestination(t, status(200))
	b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: d.URL}})
	q := b.startWorker(t)
	for i := range 5 {
		b.record(t, fmt.Sprintf("evt_%d", i), body)
	}
	rec := jobs.NewReconciler(b.store, q.enqueuer, jobs.ReconcilerConfig{MinAge: time.Millisecond, Logger: testLogger(t)})
	time.Sleep(10 * time.Millisecond)
	rep, err := rec.Pass(testCtx(t))
	if err != nil || rep.Actions["handed_off"] != 5 || rep.Settled != 0 {
		t.Fatalf("first pass: %+v, %v; want 5 tasks handed off, nothing settled", rep, err)
	}
	pipelinetest.Eventually(t, 10*time.Second, "5 deliveries", func() bool { return len(d.Calls()) == 5 })
	pipelinetest.Eventually(t, 10*time.Second, "5 runs done", func() bool {
		return b.schema.Int(t, `SELECT count(*) FROM job_runs WHERE status = 'done'`) == 5
	})
	if n := b.schema.Int(t, `SELECT count(*) FROM event_outbox`); n != 0 {
		t.Fatalf("%d events still in the outbox after their claims", n)
	}
	rep, err = rec.Pass(testCtx(t))
	if err != nil || rep.Settled != 0 || rep.Checked != 0 || len(rep.Actions) != 0 {
		t.Fatalf("second pass: %+v, %v; want nothing left to check or settle", rep, err)
	}
}

// metricValue reads one sample from reg: the metric name with the label
// pair, or without labels when label is empty.
func metricValue(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			match := label == ""
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					match = true
				}
			}
			if !match {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			}
		}
	}
	return 0
}

// scriptCalls is a go-redis hook that records how many tasks each
// script call of the relay wrote (its keys but the pending list).
type scriptCalls struct {
	mu    sync.Mutex
	sizes []int
}

func (s *scriptCalls) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *scriptCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (s *scriptCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			if args := c.Args(); len(args) > 2 && c.Name() == "evalsha" && c.Err() == nil {
				if n, ok := args[2].(int); ok {
					s.mu.Lock()
					s.sizes = append(s.sizes, n-1)
					s.mu.Unlock()
				}
			}
		}
		return err
	}
}

// batches returns the task counts of the script calls so far.
func (s *scriptCalls) batches() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.sizes...)
}

// total returns how many tasks the script calls wrote.
func (s *scriptCalls) total() int {
	n := 0
	for _, b := range s.batches() {
		n += b
	}
	return n
}

// fastPath is a running relay, the hook that sees its script calls, and
// the test's own Redis with the queue the relay fills.
type fastPath struct {
	relay *jobs.Relay
	calls *scriptCalls
	redis *redistest.DB
	stop  func() // ends Run and waits for it to return
}

func startFastPath(t *testing.T, linger time.Duration) *fastPath {
	t.Helper()
	r := redistest.New(t)
	routes := jobs.Routes{"src": {"dst": buildDestination(t, jobs.DestinationSpec{Name: "dst"})}}
	// Redis learns the script first (from a task of another queue), so
	// every batch is one EVALSHA the hook sees.
	if _, err := jobs.NewEnqueuer(r.Client, r.Queue+"_warm", routes).EnqueueEvents(testCtx(t), []dedupe.EventRef{{Source: "src", ExternalID: "warm"}}); err != nil {
		t.Fatal(err)
	}
	calls := &scriptCalls{}
	r.Client.AddHook(calls)
	relay := jobs.NewRelay(jobs.NewEnqueuer(r.Client, r.Queue, routes), nil, jobs.RelayConfig{Linger: linger, Logger: testLogger(t)})
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan struct{})
	go func() { defer close(done); relay.Run(ctx) }()
	stop := func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after its context ended")
		}
	}
	t.Cleanup(cancel)
	return &fastPath{relay: relay, calls: calls, redis: r, stop: stop}
}

// handOffMarks records the transactions the relay marks.
type handOffMarks struct {
	mu     sync.Mutex
	marked []int64
}

func (m *handOffMarks) MarkHandedOff(_ context.Context, xids []int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.marked = append(m.marked, xids...)
	return nil
}

// TestRelayMarksTransactionsEnqueuedWhole: the relay marks a recording
// transaction once it has enqueued every event of it, also across
// batches; never one of a batch Redis refused, nor one it saw only part
// of.
func TestRelayMarksTransactionsEnqueuedWhole(t *testing.T) {
	t.Parallel()
	routes := jobs.Routes{"src": {"dst": buildDestination(t, jobs.DestinationSpec{Name: "dst"})}}
	r := redistest.New(t)
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second})
	ref := func(id string, xid int64, with int) dedupe.EventRef {
		return dedupe.EventRef{Source: "src", ExternalID: id, RecordXID: xid, RecordedWith: with}
	}
	for _, tc := range []struct {
		name      string
		client    *redis.Client
		batchSize int
		refs      []dedupe.EventRef
		want      string
	}{
		// 7: three events, one batch; 8: two copies of its one event;
		// 9: two of three events (a request cancelled before notifying).
		{"one batch", r.Client, 0, []dedupe.EventRef{ref("a1", 7, 3), ref("a2", 7, 3), ref("b1", 8, 1), ref("b1", 8, 1), ref("a3", 7, 3), ref("c1", 9, 3), ref("c2", 9, 3)}, "[8 7]"},
		// A batch per event: 7 is marked with its last.
		{"batches of one", r.Client, 1, []dedupe.EventRef{ref("a1", 7, 2), ref("x", 0, 0), ref("a2", 7, 2)}, "[7]"},
		{"part of one", r.Client, 1, []dedupe.EventRef{ref("a1", 7, 2), ref("x", 0, 0)}, "[]"},
		{"refused", down, 0, []dedupe.EventRef{ref("a1", 7, 1)}, "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			marks := &handOffMarks{}
			relay := jobs.NewRelay(jobs.NewEnqueuer(tc.client, r.Queue, routes), marks,
				jobs.RelayConfig{Linger: time.Hour, BatchSize: tc.batchSize, Logger: testLogger(t)})
			for _, ref := range tc.refs {
				relay.Notify(context.Background(), ref)
			}
			ctx, cancel := context.WithCancel(testCtx(t))
			cancel() // Run hands off what was notified, then returns
			relay.Run(ctx)
			marks.mu.Lock()
			defer marks.mu.Unlock()
			if got := fmt.Sprint(marks.marked); got != tc.want {
				t.Errorf("marked %s, want %s", got, tc.want)
			}
		})
	}
}

// pending returns how many tasks wait in the queue.
func (f *fastPath) pending(t *testing.T) int64 {
	t.Helper()
	return f.redis.Client.LLen(testCtx(t), "asynq:{"+f.redis.Queue+"}:pending").Val()
}

// TestRelayFastPathLingers: events notified while a batch lingers are
// enqueued as one batch; each notified after the last batch went out,
// with a linger shorter than the wait, goes out alone.
func TestRelayFastPathLingers(t *testing.T) {
	t.Parallel()
	t.Run("OneBatch", func(t *testing.T) {
		t.Parallel()
		f := startFastPath(t, time.Hour)
		for i := range 5 {
			f.relay.Notify(context.Background(), dedupe.EventRef{Source: "src", ExternalID: fmt.Sprintf("evt_%d", i)})
		}
		f.stop() // the lingering batch goes out at the stop
		if got := fmt.Sprint(f.calls.batches()); got != "[5]" {
			t.Fatalf("batches %s, want [5]", got)
		}
		if n := f.pending(t); n != 5 {
			t.Fatalf("%d tasks pending, want 5", n)
		}
	})
	t.Run("OneByOne", func(t *testing.T) {
		t.Parallel()
		f := startFastPath(t, time.Millisecond)
		for i := range 5 {
			f.relay.Notify(context.Background(), dedupe.EventRef{Source: "src", ExternalID: fmt.Sprintf("evt_%d", i)})
			pipelinetest.Eventually(t, 10*time.Second, "the event enqueued", func() bool { return f.calls.total() == i+1 })
		}
		f.stop()
		if got := fmt.Sprint(f.calls.batches()); got != "[1 1 1 1 1]" {
			t.Fatalf("batches %s, want [1 1 1 1 1]", got)
		}
		if n := f.pending(t); n != 5 {
			t.Fatalf("%d tasks pending, want 5", n)
		}
	})
}

// TestRelayStopWhileLingering: a batch still gathering company when the
// relay stops is handed off before Run returns, not left to the reconciler.
func TestRelayStopWhileLingering(t *testing.T) {
	t.Parallel()
	f := startFastPath(t, time.Hour)
	f.relay.Notify(context.Background(), dedupe.EventRef{Source: "src", ExternalID: "evt_1"})
	time.Sleep(200 * time.Millisecond) // the fast path is lingering now
	f.stop()
	if got := fmt.Sprint(f.calls.batches()); got != "[1]" {
		t.Fatalf("batches %s, want [1]", got)
	}
	if n := f.pending(t); n != 1 {
		t.Fatalf("%d tasks pending, want 1", n)
	}
}

// TestBacklogLeavesOutUnconfiguredSources: an event of a source removed
// from the configuration stays in the outbox (putting the source back
// delivers it) but is not counted in webhookd_relay_backlog, which no
// worker of this configuration would ever drain (issue 23, I4). Before,
// the gauge stayed at 1 or more: a false backlog alert.
func TestBacklogLeavesOutUnconfiguredSources(t *testing.T) {
	t.Parallel()
	b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: "http://127.0.0.1:9/dst"}})
	b.record(t, "evt_configured", body)
	if _, err := dedupe.RecordBatch(testCtx(t), b.schema.Pool, []dedupe.Event{{Source: "removed", ExternalID: "evt_orphan",
		ContentType: "application/json", Payload: []byte(body)}}); err != nil {
		t.Fatal(err)
	}
	r := redistest.New(t)
	reg := prometheus.NewRegistry()
	rec := jobs.NewReconciler(b.store, jobs.NewEnqueuer(r.Client, r.Queue, b.routes), jobs.ReconcilerConfig{Interval: 20 * time.Millisecond, MinAge: time.Hour,
		Logger: testLogger(t), Metrics: jobs.NewMetrics(reg)})
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	go rec.Run(ctx)
	pipelinetest.Eventually(t, 5*time.Second, "the backlog gauge set", func() bool {
		return metricValue(t, reg, "webhookd_relay_backlog", "", "") != 0
	})
	if v := metricValue(t, reg, "webhookd_relay_backlog", "", ""); v != 1 {
		t.Errorf("webhookd_relay_backlog %v, want 1: the configured source's event, not the removed source's", v)
	}
	if n := b.schema.Int(t, `SELECT count(*) FROM event_outbox WHERE source = 'removed'`); n != 1 {
		t.Errorf("%d outbox rows of the removed source, want it kept (until retention)", n)
	}
}

// slowCountStore is a Store whose backlog count takes a while, as it
// does on an outbox of millions, and is counted.
type slowCountStore struct {
	*dedupe.Store
	took   time.Duration
	counts atomic.Int32
}

func (s *slowCountStore) PendingCount(ctx context.Context, sources []string) (int64, error) {
	s.counts.Add(1)
	time.Sleep(s.took)
	return s.Store.PendingCount(ctx, sources)
}

// TestBacklogCountCostsLittle: the backlog gauge counts every outbox
// row, so a count that takes d is not repeated for 50 × d however often
// passes run. Before, every pass on every process counted: on a backlog
// of millions, Postgres spent more on the gauge than on deliveries.
func TestBacklogCountCostsLittle(t *testing.T) {
	t.Parallel()
	b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: "http://127.0.0.1:9/dst"}})
	b.record(t, "evt_1", body)
	r := redistest.New(t)
	reg := prometheus.NewRegistry()
	store := &slowCountStore{Store: b.store, took: 20 * time.Millisecond}
	rec := jobs.NewReconciler(store, jobs.NewEnqueuer(r.Client, r.Queue, b.routes), jobs.ReconcilerConfig{Interval: 10 * time.Millisecond,
		MinAge: time.Hour, Logger: testLogger(t), Metrics: jobs.NewMetrics(reg)})
	ctx, cancel := context.WithTimeout(testCtx(t), 600*time.Millisecond)
	defer cancel()
	rec.Run(ctx) // passes every 10 ms for 600 ms; the first count makes the next wait at least 1 s
	if n := store.counts.Load(); n != 1 {
		t.Errorf("the backlog counted %d times in 600 ms, want once", n)
	}
	if v := metricValue(t, reg, "webhookd_relay_backlog", "", ""); v != 1 {
		t.Errorf("webhookd_relay_backlog %v, want 1", v)
	}
}

// TestReconcilerRechecksTheOutboxEveryRecheck: once the outbox walk has
// caught up, a pass reads only the events that came of age since; the
// queued ones it passed are read again, and a task Redis lost written
// again, at the first pass Recheck after the walk's start.
func TestReconcilerRechecksTheOutboxEveryRecheck(t *testing.T) {
	t.Parallel()
	b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: "http://127.0.0.1:1"}})
	r := redistest.New(t)
	enq := jobs.NewEnqueuer(r.Client, r.Queue, b.routes)
	var (
		mu  sync.Mutex
		now = time.Now()
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	rec := jobs.NewReconciler(b.store, enq, jobs.ReconcilerConfig{Interval: time.Second, Recheck: 4 * time.Second,
		MinAge: time.Millisecond, Logger: testLogger(t), Now: clock})
	pass := func(what string, checked int) jobs.PassReport {
		t.Helper()
		time.Sleep(5 * time.Millisecond) // MinAge, on Postgres's clock
		rep, err := rec.Pass(testCtx(t))
		if err != nil || rep.Checked != checked {
			t.Fatalf("%s: %+v, %v; want %d tasks checked", what, rep, err, checked)
		}
		return rep
	}
	for i := range 3 {
		b.record(t, fmt.Sprintf("evt_%d", i), body)
	}
	if rep := pass("first pass", 3); rep.Actions["handed_off"] != 3 {
		t.Fatalf("first pass %+v, want 3 tasks handed off", rep)
	}
	pass("a pass with nothing new", 0)
	b.record(t, "evt_3", body)
	pass("a pass after one more event", 1)

	// Redis loses the queue: found at the first pass Recheck after the
	// walk started, not before.
	keys, err := r.Client.Keys(testCtx(t), "asynq:{"+r.Queue+"}:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("the queue's keys: %v, %v", keys, err)
	}
	if err := r.Client.Del(testCtx(t), keys...).Err(); err != nil {
		t.Fatal(err)
	}
	advance(3 * time.Second)
	pass("a pass before Recheck", 0)
	advance(time.Second)
	if rep := pass("the pass at Recheck", 4); rep.Actions["written"]+rep.Actions["handed_off"] != 4 {
		t.Fatalf("pass at Recheck %+v, want the 4 lost tasks written again", rep)
	}
	if n := r.Client.LLen(testCtx(t), "asynq:{"+r.Queue+"}:pending").Val(); n != 4 {
		t.Fatalf("%d tasks pending after the recheck, want 4", n)
	}
}

// lookupCountStore counts the outbox entries whose events the walk reads.
type lookupCountStore struct {
	*dedupe.Store
	read atomic.Int32
}

func (s *lookupCountStore) UnsettledEvents(ctx context.Context, entries []dedupe.OutboxEntry) ([]dedupe.UnsettledEvent, error) {
	s.read.Add(int32(len(entries)))
	return s.Store.UnsettledEvents(ctx, entries)
}

// TestReconcilerReadsOnlyEventsRedisDoesNotHold: under a backlog the walk
// pages through every queued event each Recheck; an event whose task
// Redis holds pending is checked without reading its event or runs
// (counted as pending all the same), and only one whose task Redis lost
// is read and written again.
func TestReconcilerReadsOnlyEventsRedisDoesNotHold(t *testing.T) {
	t.Parallel()
	b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: "http://127.0.0.1:1"}})
	r := redistest.New(t)
	store := &lookupCountStore{Store: b.store}
	var (
		mu  sync.Mutex
		now = time.Now()
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	reg := prometheus.NewRegistry()
	rec := jobs.NewReconciler(store, jobs.NewEnqueuer(r.Client, r.Queue, b.routes), jobs.ReconcilerConfig{Interval: time.Second,
		Recheck: 4 * time.Second, MinAge: time.Millisecond, Logger: testLogger(t), Now: clock, Metrics: jobs.NewMetrics(reg)})
	pass := func(what string) jobs.PassReport {
		t.Helper()
		time.Sleep(5 * time.Millisecond) // MinAge, on Postgres's clock
		store.read.Store(0)
		rep, err := rec.Pass(testCtx(t))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return rep
	}
	for i := range 4 {
		b.record(t, fmt.Sprintf("evt_%d", i), body)
	}
	if rep := pass("first pass"); rep.Actions["handed_off"] != 4 || store.read.Load() != 4 {
		t.Fatalf("first pass %+v, %d events read; want 4 tasks handed off, each event read", rep, store.read.Load())
	}
	advance(4 * time.Second)
	if rep := pass("the pass at Recheck"); rep.Checked != 4 || len(rep.Actions) != 0 || store.read.Load() != 0 {
		t.Fatalf("pass at Recheck %+v, %d events read; want 4 tasks checked, nothing done, no event read", rep, store.read.Load())
	}
	if v := metricValue(t, reg, "webhookd_recovery_tasks_total", "action", "pending"); v != 4 {
		t.Errorf("recovery pending metric %v, want the 4 tasks checked at Recheck", v)
	}

	// Redis loses one task.
	var destName string
	for name := range b.routes["src"] {
		destName = name
	}
	lost := jobs.Key("src", destName, "evt_2", 1)
	prefix := "asynq:{" + r.Queue + "}:"
	if err := r.Client.Del(testCtx(t), prefix+"t:"+lost).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.Client.LRem(testCtx(t), prefix+"pending", 0, lost).Err(); err != nil {
		t.Fatal(err)
	}
	advance(4 * time.Second)
	// (handed_off: the relay did not write these tasks, the first pass did.)
	if rep := pass("the next pass at Recheck"); rep.Checked != 4 || rep.Actions["handed_off"] != 1 || store.read.Load() != 1 {
		t.Fatalf("next pass at Recheck %+v, %d events read; want 4 checked, the lost one read and written again", rep, store.read.Load())
	}
	if n := r.Client.LLen(testCtx(t), prefix+"pending").Val(); n != 4 {
		t.Fatalf("%d tasks pending, want 4", n)
	}
}

// orderWaitCountStore counts the reconciler's counts of runs held by
// order.
type orderWaitCountStore struct {
	*dedupe.Store
	asked atomic.Int32
}

func (s *orderWaitCountStore) OrderWaits(ctx context.Context) ([]dedupe.OrderWait, error) {
	s.asked.Add(1)
	return s.Store.OrderWaits(ctx)
}

// TestOrderWaitsAskedOnlyWithFIFO: the count of runs held by order reads
// every running run each pass; with no fifo destination none can be held
// so, and it is not asked.
func TestOrderWaitsAskedOnlyWithFIFO(t *testing.T) {
	t.Parallel()
	for _, fifo := range []bool{false, true} {
		b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: "http://127.0.0.1:9/dst"}})
		d := b.routes["src"]["dst"]
		d.Order.FIFO = fifo
		b.routes["src"]["dst"] = d
		r := redistest.New(t)
		store := &orderWaitCountStore{Store: b.store}
		rec := jobs.NewReconciler(store, jobs.NewEnqueuer(r.Client, r.Queue, b.routes), jobs.ReconcilerConfig{Interval: 10 * time.Millisecond,
			MinAge: time.Hour, Logger: testLogger(t)})
		ctx, cancel := context.WithTimeout(testCtx(t), 200*time.Millisecond)
		rec.Run(ctx)
		cancel()
		if n := store.asked.Load(); (n > 0) != fifo {
			t.Errorf("fifo %v: the order waits asked %d times", fifo, n)
		}
	}
}
