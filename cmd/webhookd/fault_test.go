package main

// Fault tests: real webhookd processes (built once per test binary by
// internal/proctest), real Postgres and Redis, real kills. Each test owns
// its Postgres schema, its Redis (a DB of the shared server, or its own
// redis-server), its destination (an httptest.Server in this process) and
// every process it starts; all are stopped when it ends. They run in
// parallel and never skip: a missing prerequisite fails them.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/webhookd/webhookd/internal/testkit/pgtest"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/internal/testkit/proctest"
	"github.com/webhookd/webhookd/internal/testkit/redistest"
)

func TestMain(m *testing.M) {
	os.Exit(proctest.Main(m))
}

// faultSink is the destination of a fault test: it records every call and
// answers through a hook the test may replace.
type faultSink struct {
	*httptest.Server
	mu     sync.Mutex
	calls  map[string][]string // key → Webhookd-Attempt of each call
	events map[string]string   // key → Webhookd-Event-Id
	hook   func(key string, n int, w http.ResponseWriter, r *http.Request) bool
}

func newFaultSink(t *testing.T) *faultSink {
	t.Helper()
	s := &faultSink{calls: map[string][]string{}, events: map[string]string{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		key := r.Header.Get("Idempotency-Key")
		s.mu.Lock()
		s.calls[key] = append(s.calls[key], r.Header.Get("Webhookd-Attempt"))
		s.events[key] = r.Header.Get("Webhookd-Event-Id")
		n := len(s.calls[key])
		hook := s.hook
		s.mu.Unlock()
		if hook != nil && hook(key, n, w, r) {
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(s.Close)
	return s
}

// callsOf returns the Webhookd-Attempt headers of key's calls.
func (s *faultSink) callsOf(key string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls[key]...)
}

// keys returns how many distinct keys were called, and those called more
// than once.
func (s *faultSink) keys() (int, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var repeated []string
	for k, c := range s.calls {
		if len(c) > 1 {
			repeated = append(repeated, fmt.Sprintf("%s×%d", k, len(c)))
		}
	}
	return len(s.calls), repeated
}

// faultConfig is the YAML config of a fault test: one unsigned source
// "test" (event id json:id) forwarding to one destination "sink".
func faultConfig(databaseURL, redisURL, queue, destURL string) string {
	return fmt.Sprintf(`database_url: %q
redis_url: %q
queue: %q
lease: 3s
log_level: debug
worker:
  concurrency: 8
  retry_base: 100ms
  retry_max: 1s
  default_hold: 1s
  recovery_interval: 500ms
  recovery_min_age: 300ms
  shutdown_timeout: 5s
sources:
  - name: test
    verify:
      scheme: none
      allow_unsigned: true
    event_id: json:id
    destinations:
      - name: sink
        url: %q
        timeout: 2s
        max_attempts: 5
`, databaseURL, redisURL, queue, destURL)
}

func keyOf(id string) string { return "test:sink:" + id }

var sendClient = &http.Client{Timeout: 15 * time.Second}

// send posts event id to the gateway and returns the status code, or an
// error when no answer came.
func send(gatewayURL, id string) (int, error) {
	resp, err := sendClient.Post(gatewayURL+"/webhooks/test", "application/json",
		strings.NewReader(fmt.Sprintf(`{"id":%q,"type":"fault.test"}`, id)))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

func mustSend(t *testing.T, gatewayURL, id string, want ...int) {
	t.Helper()
	code, err := send(gatewayURL, id)
	if err != nil {
		t.Fatalf("sending %s: %v", id, err)
	}
	for _, w := range want {
		if code == w {
			return
		}
	}
	t.Fatalf("sending %s: HTTP %d, want %v", id, code, want)
}

// checkNoDuplicates runs `webhookd check duplicates`, the operator's
// proof, and fails the test unless it exits 0.
func checkNoDuplicates(t *testing.T, bin, config string) {
	t.Helper()
	cmd := exec.Command(bin, "check", "duplicates", "--config", config)
	cmd.Env = append(os.Environ(), "DATABASE_URL=", "REDIS_URL=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("webhookd check duplicates: %v\n%s", err, out)
	}
}

// TestFaultWorkerKilledMidCall: the destination holds event X's call; the
// worker is SIGKILLed mid-call; a new worker takes over. X ends done
// within SPEC's bound (lease + lease/2 + 10s, whatever Asynq's own lease
// is: the reconciler takes the run back once its lease passes and puts
// the task the dead worker held back on the queue), every call carried
// X's key, the crash counted as an attempt, and no other event was
// affected.
func TestFaultWorkerKilledMidCall(t *testing.T) {
	t.Parallel()
	start := time.Now()
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	rdb := redistest.New(t)
	dest := newFaultSink(t)
	const victim = "evt_victim"
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // runs before the sink closes
	dest.hook = func(key string, n int, w http.ResponseWriter, r *http.Request) bool {
		if key == keyOf(victim) && n == 1 {
			arrived <- struct{}{}
			<-release
			return false
		}
		return false
	}
	cfg := proctest.WriteConfig(t, faultConfig(schema.URL, rdb.URL, rdb.Queue, dest.URL))
	gw := proctest.StartWebhookd(t, "gateway", bin, "gateway", cfg)
	w1 := proctest.StartWebhookd(t, "worker-1", bin, "worker", cfg)

	others := []string{"evt_a", "evt_b", "evt_c", "evt_d"}
	for _, id := range others[:2] {
		mustSend(t, gw.URL(), id, http.StatusAccepted)
	}
	// Settled before the kill: a call whose outcome was not stored yet
	// would rightly be repeated (same key) after the crash.
	pipelinetest.Eventually(t, 30*time.Second, "the first events done", func() bool {
		return schema.Int(t, `SELECT count(*) FROM job_runs WHERE status = 'done'`) == 2
	})
	mustSend(t, gw.URL(), victim, http.StatusAccepted)
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the victim's call never reached the destination")
	}
	w1.Kill()
	killedAt := time.Now()
	// The task the dead worker held, as Asynq stores it: active, under
	// Asynq's own lease, which its recoverer would act on much later.
	insp := asynq.NewInspectorFromRedisClient(rdb.Client)
	old, err := insp.GetTaskInfo(rdb.Queue, keyOf(victim))
	if err != nil || old.State != asynq.TaskStateActive {
		t.Fatalf("the dead worker's task: %+v %v; want it active", old, err)
	}
	w2 := proctest.StartWebhookd(t, "worker-2", bin, "worker", cfg)
	for _, id := range others[2:] {
		mustSend(t, gw.URL(), id, http.StatusAccepted)
	}

	pipelinetest.Eventually(t, 2*recoveryBound, "the victim's run to be done", func() bool {
		return schema.Int(t, `SELECT count(*) FROM job_runs WHERE key = $1 AND status = 'done'`, keyOf(victim)) == 1
	})
	took := time.Since(killedAt)
	t.Logf("victim recovered %s after the kill", took.Round(time.Millisecond))
	if took > recoveryBound {
		t.Fatalf("victim recovered %s after the kill, want within %s", took.Round(time.Millisecond), recoveryBound)
	}
	calls := dest.callsOf(keyOf(victim))
	if len(calls) < 2 || calls[0] != "1" || calls[len(calls)-1] != strconv.Itoa(len(calls)) {
		t.Fatalf("victim's calls carried Webhookd-Attempt %v, want 1..n with n ≥ 2", calls)
	}
	dest.mu.Lock()
	for k, id := range dest.events {
		if id == victim && k != keyOf(victim) {
			t.Errorf("victim called with key %q, want %q", k, keyOf(victim))
		}
	}
	dest.mu.Unlock()
	if n := schema.Int(t, `SELECT attempts FROM job_runs WHERE key = $1`, keyOf(victim)); n < 1 {
		t.Fatalf("victim's run has %d attempts, want the crash counted", n)
	}
	if n := schema.Int(t, `SELECT calls FROM job_runs WHERE key = $1`, keyOf(victim)); n < 2 {
		t.Fatalf("victim's run has %d calls, want ≥ 2", n)
	}
	// The events sent after the kill may still be on their way.
	pipelinetest.Eventually(t, 30*time.Second, "every run done", func() bool {
		return schema.Int(t, `SELECT count(*) FROM job_runs WHERE status = 'done'`) == len(others)+1
	})
	for _, id := range others {
		if c := dest.callsOf(keyOf(id)); len(c) != 1 || c[0] != "1" {
			t.Errorf("%s: calls %v, want exactly one (attempt 1)", id, c)
		}
	}
	// Every process runs the reconciler, so the gateway may take the run
	// back before worker-2 does.
	if !strings.Contains(w2.Logs(), "lease passed") && !strings.Contains(gw.Logs(), "lease passed") {
		t.Errorf("neither worker-2 nor the gateway logged the sweeper's reset")
	}

	// The old task comes back after the retry is done, as Asynq's own
	// recoverer brings it back once Asynq's lease passes, or as a
	// duplicate copy would (here put back at once, to keep the test
	// short): it finds the key settled in job_runs and calls nothing.
	callsBefore := len(dest.callsOf(keyOf(victim)))
	if _, err := asynq.NewClientFromRedisClient(rdb.Client).Enqueue(asynq.NewTask(old.Type, old.Payload),
		asynq.TaskID(old.ID), asynq.Queue(old.Queue), asynq.MaxRetry(old.MaxRetry), asynq.Timeout(old.Timeout)); err != nil {
		t.Fatalf("putting the old task back: %v", err)
	}
	pipelinetest.Eventually(t, 10*time.Second, "the old task to run", func() bool {
		_, err := insp.GetTaskInfo(rdb.Queue, keyOf(victim))
		return errors.Is(err, asynq.ErrTaskNotFound)
	})
	if !strings.Contains(w2.Logs(), `"msg":"key already done; not calling the destination again","source":"test","event_id":"`+victim+`"`) {
		t.Errorf("worker-2 did not log the old task finding the key done")
	}
	time.Sleep(500 * time.Millisecond)
	if c := dest.callsOf(keyOf(victim)); len(c) != callsBefore {
		t.Fatalf("the old task called the destination: %d calls, were %d", len(c), callsBefore)
	}
	if n := schema.Int(t, `SELECT calls FROM job_runs WHERE key = $1 AND status = 'done'`, keyOf(victim)); n != callsBefore {
		t.Fatalf("the run counts %d calls after the old task ran, want %d", n, callsBefore)
	}
	checkNoDuplicates(t, bin, cfg)
	t.Logf("took %s", time.Since(start).Round(time.Millisecond))
}

// TestFaultRedisDownAtIngest: with the test's own redis-server stopped,
// 50 events are all acknowledged; once Redis is back on the same port
// (empty), the relay enqueues them and each is delivered exactly once.
func TestFaultRedisDownAtIngest(t *testing.T) {
	t.Parallel()
	start := time.Now()
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	redis := proctest.StartRedis(t)
	dest := newFaultSink(t)
	cfg := proctest.WriteConfig(t, faultConfig(schema.URL, redis.URL, "webhookd", dest.URL))
	gw := proctest.StartWebhookd(t, "gateway", bin, "gateway", cfg)
	proctest.StartWebhookd(t, "worker", bin, "worker", cfg)

	redis.Stop()
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("evt_%02d", i)
			code, err := send(gw.URL(), id)
			if err == nil && code != http.StatusAccepted {
				err = fmt.Errorf("%s: HTTP %d, want 202", id, code)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	if got := schema.Int(t, `SELECT count(*) FROM event_outbox`); got != n {
		t.Fatalf("%d events pending hand-off while Redis is down, want %d", got, n)
	}
	time.Sleep(time.Second) // the relay keeps failing meanwhile
	redis.Start()
	restarted := time.Now()

	pipelinetest.Eventually(t, 60*time.Second, "all 50 delivered", func() bool {
		k, _ := dest.keys()
		return k == n
	})
	t.Logf("all delivered %s after Redis came back", time.Since(restarted).Round(time.Millisecond))
	time.Sleep(2 * time.Second) // give a second delivery the chance to show up
	if k, repeated := dest.keys(); k != n || len(repeated) > 0 {
		t.Fatalf("%d keys delivered, repeated: %v; want %d, each once", k, repeated, n)
	}
	pipelinetest.Eventually(t, 10*time.Second, "all runs done", func() bool {
		return schema.Int(t, `SELECT count(*) FROM job_runs WHERE status = 'done'`) == n
	})
	checkNoDuplicates(t, bin, cfg)
	t.Logf("took %s", time.Since(start).Round(time.Millisecond))
}

// TestFaultPostgresDown: webhookd reaches Postgres through a TCP proxy the
// test cuts. While cut, the gateway answers 503 (never 2xx) and /readyz
// fails; after restoring it, the sender's retry is accepted and the event
// delivered once.
func TestFaultPostgresDown(t *testing.T) {
	t.Parallel()
	start := time.Now()
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	rdb := redistest.New(t)
	dest := newFaultSink(t)
	u, err := url.Parse(schema.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := proctest.StartProxy(t, u.Host)
	u.Host = proxy.Addr
	cfg := proctest.WriteConfig(t, faultConfig(u.String(), rdb.URL, rdb.Queue, dest.URL))
	srv := proctest.StartWebhookd(t, "serve", bin, "serve", cfg)

	mustSend(t, srv.URL(), "evt_before", http.StatusAccepted)
	pipelinetest.Eventually(t, 20*time.Second, "evt_before delivered", func() bool { return len(dest.callsOf(keyOf("evt_before"))) == 1 })

	proxy.Cut()
	cutAt := time.Now()
	for _, id := range []string{"evt_during_1", "evt_during_2", "evt_during_3"} {
		code, err := send(srv.URL(), id)
		if err != nil {
			t.Fatalf("%s: no answer while Postgres is down (%v); want 503", id, err)
		}
		if code != http.StatusServiceUnavailable {
			t.Fatalf("%s: HTTP %d while Postgres is down, want 503", id, code)
		}
	}
	if resp, err := http.Get(srv.URL() + "/readyz"); err != nil || resp.StatusCode == http.StatusOK {
		t.Fatalf("/readyz while Postgres is down: %v %v, want not ready", resp, err)
	} else {
		resp.Body.Close()
	}
	if n := schema.Int(t, `SELECT count(*) FROM events WHERE external_id LIKE 'evt_during%'`); n != 0 {
		t.Fatalf("%d events recorded while answering 503", n)
	}

	t.Logf("three 503s within %s of the cut", time.Since(cutAt).Round(time.Millisecond))
	proxy.Restore()
	restoredAt := time.Now()
	pipelinetest.Eventually(t, 30*time.Second, "the sender's retry to be accepted", func() bool {
		code, err := send(srv.URL(), "evt_during_1")
		return err == nil && code == http.StatusAccepted
	})
	t.Logf("retry accepted %s after the restore", time.Since(restoredAt).Round(time.Millisecond))
	mustSend(t, srv.URL(), "evt_during_2", http.StatusAccepted)
	mustSend(t, srv.URL(), "evt_during_3", http.StatusAccepted)
	mustSend(t, srv.URL(), "evt_during_1", http.StatusOK) // a repeat now
	pipelinetest.Eventually(t, 30*time.Second, "the retried events delivered", func() bool {
		k, _ := dest.keys()
		return k == 4
	})
	time.Sleep(time.Second)
	if k, repeated := dest.keys(); k != 4 || len(repeated) > 0 {
		t.Fatalf("%d keys delivered, repeated %v; want 4, each once", k, repeated)
	}
	checkNoDuplicates(t, bin, cfg)
	t.Logf("took %s", time.Since(start).Round(time.Millisecond))
}

// TestFaultKilledBetweenCommitAndEnqueue: a gateway built with the
// faultinject tag exits right after an event commits, before answering
// or handing it to the queue. After a restart, the relay finds the event
// and it is delivered once; the sender's retry is a duplicate.
func TestFaultKilledBetweenCommitAndEnqueue(t *testing.T) {
	t.Parallel()
	start := time.Now()
	faulty := proctest.Binary(t, "faultinject")
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	rdb := redistest.New(t)
	dest := newFaultSink(t)
	cfg := proctest.WriteConfig(t, faultConfig(schema.URL, rdb.URL, rdb.Queue, dest.URL))
	gw := proctest.StartWebhookd(t, "gateway-faulty", faulty, "gateway", cfg, "WEBHOOKD_FAULT=exit-after-commit")

	if code, err := send(gw.URL(), "evt_orphan"); err == nil {
		t.Fatalf("the faulty gateway answered HTTP %d; want it to die before answering", code)
	}
	if code := gw.Wait(10 * time.Second); code != 3 {
		t.Fatalf("faulty gateway exited %d, want 3 (the injected fault)", code)
	}
	if n := schema.Int(t, `SELECT count(*) FROM events e JOIN event_outbox o USING (source, external_id) WHERE e.external_id = 'evt_orphan'`); n != 1 {
		t.Fatalf("the committed, never enqueued event is not there (%d rows)", n)
	}
	if n := schema.Int(t, `SELECT count(*) FROM job_runs`); n != 0 {
		t.Fatalf("%d runs before any hand-off", n)
	}
	// Started after that check: its reconciler would hand the orphan off
	// too (correctly), and on a loaded machine before the check.
	proctest.StartWebhookd(t, "worker", bin, "worker", cfg)

	gw2 := proctest.StartWebhookd(t, "gateway-2", bin, "gateway", cfg)
	pipelinetest.Eventually(t, 30*time.Second, "the relay to deliver the orphan", func() bool {
		return len(dest.callsOf(keyOf("evt_orphan"))) == 1
	})
	mustSend(t, gw2.URL(), "evt_orphan", http.StatusOK) // the sender's retry
	time.Sleep(time.Second)
	if c := dest.callsOf(keyOf("evt_orphan")); len(c) != 1 {
		t.Fatalf("orphan delivered %d times, want once", len(c))
	}
	pipelinetest.Eventually(t, 10*time.Second, "the run to be done", func() bool {
		return schema.Int(t, `SELECT count(*) FROM job_runs WHERE key = $1 AND status = 'done'`, keyOf("evt_orphan")) == 1
	})
	var deliveries int
	if err := schema.Pool.QueryRow(context.Background(), `SELECT deliveries FROM event_deliveries WHERE external_id = 'evt_orphan'`).Scan(&deliveries); err != nil || deliveries != 2 {
		t.Fatalf("deliveries %d (%v), want 2 (the cut-off one and the retry)", deliveries, err)
	}
	checkNoDuplicates(t, bin, cfg)
	t.Logf("took %s", time.Since(start).Round(time.Millisecond))
}

// TestFaultReplicas: two gateways and two workers on one database and one
// Redis; every event is sent to both gateways at once, five times. Each
// event gets one row and one destination call.
func TestFaultReplicas(t *testing.T) {
	t.Parallel()
	start := time.Now()
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	rdb := redistest.New(t)
	dest := newFaultSink(t)
	cfg := proctest.WriteConfig(t, faultConfig(schema.URL, rdb.URL, rdb.Queue, dest.URL))
	gws := []*proctest.Process{
		proctest.StartWebhookd(t, "gateway-1", bin, "gateway", cfg),
		proctest.StartWebhookd(t, "gateway-2", bin, "gateway", cfg),
	}
	proctest.StartWebhookd(t, "worker-1", bin, "worker", cfg)
	proctest.StartWebhookd(t, "worker-2", bin, "worker", cfg)

	const events, copies = 30, 5
	var wg sync.WaitGroup
	codes := make(chan int, events*copies*len(gws))
	for i := range events {
		for range copies {
			for _, gw := range gws {
				wg.Add(1)
				go func() {
					defer wg.Done()
					code, err := send(gw.URL(), fmt.Sprintf("evt_%02d", i))
					if err != nil {
						t.Errorf("send: %v", err)
					}
					codes <- code
				}()
			}
		}
	}
	wg.Wait()
	close(codes)
	accepted := 0
	for c := range codes {
		switch c {
		case http.StatusAccepted:
			accepted++
		case http.StatusOK:
		default:
			t.Errorf("HTTP %d, want 202 or 200", c)
		}
	}
	if accepted != events {
		t.Fatalf("%d answers were 202 (first delivery), want exactly %d", accepted, events)
	}
	if n := schema.Int(t, `SELECT count(*) FROM events`); n != events {
		t.Fatalf("%d event rows, want %d", n, events)
	}
	if n := schema.Int(t, `SELECT sum(deliveries)::int FROM event_deliveries`); n != events*copies*len(gws) {
		t.Fatalf("%d deliveries counted, want %d", n, events*copies*len(gws))
	}
	pipelinetest.Eventually(t, 30*time.Second, "every event delivered", func() bool { k, _ := dest.keys(); return k == events })
	time.Sleep(time.Second)
	if k, repeated := dest.keys(); k != events || len(repeated) > 0 {
		t.Fatalf("%d keys delivered, repeated %v; want %d, each once", k, repeated, events)
	}
	checkNoDuplicates(t, bin, cfg)
	t.Logf("took %s", time.Since(start).Round(time.Millisecond))
}

// TestFaultSIGTERMUnderLoad: a serving process is stopped with SIGTERM
// while 500 events are in flight, then started again. Every event it
// acknowledged is delivered, and no key is called twice.
func TestFaultSIGTERMUnderLoad(t *testing.T) {
	t.Parallel()
	start := time.Now()
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	rdb := redistest.New(t)
	dest := newFaultSink(t)
	dest.hook = func(_ string, _ int, w http.ResponseWriter, _ *http.Request) bool {
		time.Sleep(20 * time.Millisecond) // keep work in flight at the stop
		return false
	}
	cfg := proctest.WriteConfig(t, faultConfig(schema.URL, rdb.URL, rdb.Queue, dest.URL))
	srv := proctest.StartWebhookd(t, "serve-1", bin, "serve", cfg)

	const n = 500
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		acked []string
		sem   = make(chan struct{}, 50)
	)
	for i := range n {
		if i == n/2 {
			go func() { _ = srv.Terminate(30 * time.Second) }()
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			id := fmt.Sprintf("evt_%03d", i)
			code, err := send(srv.URL(), id)
			if err == nil && code == http.StatusAccepted {
				mu.Lock()
				acked = append(acked, id)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if srv.Wait(40*time.Second) != 0 {
		t.Errorf("serve did not exit cleanly on SIGTERM")
	}
	t.Logf("%d of %d events acknowledged before the stop", len(acked), n)
	if len(acked) == 0 {
		t.Fatal("no event was acknowledged")
	}
	proctest.StartWebhookd(t, "serve-2", bin, "serve", cfg)
	pipelinetest.Eventually(t, 60*time.Second, "every acknowledged event delivered", func() bool {
		for _, id := range acked {
			if len(dest.callsOf(keyOf(id))) == 0 {
				return false
			}
		}
		return true
	})
	time.Sleep(time.Second)
	if _, repeated := dest.keys(); len(repeated) > 0 {
		t.Fatalf("keys called more than once: %v", repeated)
	}
	checkNoDuplicates(t, bin, cfg)
	t.Logf("took %s", time.Since(start).Round(time.Millisecond))
}

// TestProcessRetention: a worker process runs retention on its schedule:
// rows older than the window are gone, newer rows stay, the run is
// recorded, and the last-success metric on /metrics moves.
func TestProcessRetention(t *testing.T) {
	t.Parallel()
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	rdb := redistest.New(t)
	dest := newFaultSink(t)
	yaml := strings.Replace(faultConfig(schema.URL, rdb.URL, rdb.Queue, dest.URL), "worker:\n",
		"retention: 1h\nworker:\n  retention_interval: 300ms\n  duplicate_check_interval: 300ms\n", 1)
	cfg := proctest.WriteConfig(t, yaml)
	gw := proctest.StartWebhookd(t, "gateway", bin, "gateway", cfg)
	for _, id := range []string{"evt_old", "evt_new"} {
		mustSend(t, gw.URL(), id, http.StatusAccepted)
	}
	pipelinetest.Eventually(t, 10*time.Second, "both events recorded", func() bool {
		return schema.Int(t, `SELECT count(*) FROM events`) == 2
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := schema.Pool.Exec(ctx, `UPDATE events SET received_at = now() - interval '2 hours',
        last_received_at = now() - interval '2 hours' WHERE external_id = 'evt_old';
DELETE FROM event_outbox WHERE external_id = 'evt_old'`); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	w := proctest.StartWebhookd(t, "worker", bin, "worker", cfg)
	pipelinetest.Eventually(t, 30*time.Second, "the old event deleted", func() bool {
		return schema.Int(t, `SELECT count(*) FROM events WHERE external_id = 'evt_old'`) == 0
	})
	if n := schema.Int(t, `SELECT count(*) FROM events WHERE external_id = 'evt_new'`); n != 1 {
		t.Fatalf("the new event was deleted")
	}
	// The run is recorded after its last batch commits, so the record
	// may trail the deletion by a moment.
	pipelinetest.Eventually(t, 10*time.Second, "a successful retention run recorded", func() bool {
		return schema.Int(t, `SELECT count(*) FROM maintenance_runs WHERE kind = 'retention' AND error IS NULL AND rows_deleted >= 1`) >= 1
	})
	pipelinetest.Eventually(t, 10*time.Second, "the last-success metric", func() bool {
		resp, err := http.Get(w.URL() + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, line := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(line, "webhookd_retention_last_success_timestamp_seconds "); ok {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				return err == nil && f >= float64(before.Unix())
			}
		}
		return false
	})
}
