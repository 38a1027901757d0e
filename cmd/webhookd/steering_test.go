package main

// Steering tests: a destination's concurrency, rate, circuit and pause
// hold across real worker processes sharing one Redis and one Postgres.

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
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

// steeredSink records every call's time and the most calls it had in
// flight at once; answer decides each answer.
type steeredSink struct {
	*httptest.Server
	mu       sync.Mutex
	inFlight int
	most     int
	calls    []time.Time
	keys     map[string]int
	answer   func(n int) (code int, hold time.Duration)
}

func newSteeredSink(t *testing.T, answer func(n int) (int, time.Duration)) *steeredSink {
	s := &steeredSink{keys: map[string]int{}, answer: answer}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.inFlight++
		s.most = max(s.most, s.inFlight)
		s.calls = append(s.calls, time.Now())
		n := len(s.calls)
		code, hold := s.answer(n)
		if code < 300 {
			s.keys[r.Header.Get("Idempotency-Key")]++
		}
		s.mu.Unlock()
		time.Sleep(hold)
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *steeredSink) snapshot() (most int, calls []time.Time, delivered map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := make(map[string]int, len(s.keys))
	for k, v := range s.keys {
		d[k] = v
	}
	return s.most, append([]time.Time(nil), s.calls...), d
}

// steeredConfig is faultConfig with the destination's steering keys.
// steeringToken is the admin token of the steering tests' processes.
const steeringToken = "steering-admin-token-0123456789"

func steeredConfig(t *testing.T, schema *pgtest.Schema, rdb *redistest.DB, url, keys string) string {
	yaml := "admin_token: " + steeringToken + "\n" + faultConfig(schema.URL, rdb.URL, rdb.Queue, url)
	return proctest.WriteConfig(t, strings.Replace(yaml, "        max_attempts: 5\n", "        max_attempts: 5\n"+keys, 1))
}

func sendEvents(t *testing.T, gw *proctest.Process, prefix string, n int) []string {
	t.Helper()
	ids := eventIDs(prefix, n)
	sendAll(t, gw.URL(), ids)
	return ids
}

// TestSteeringConcurrencyAcrossWorkers: two worker processes, concurrency
// 2: the destination never has more than 2 calls in flight; a worker
// killed holding a slot gives it back.
func TestSteeringConcurrencyAcrossWorkers(t *testing.T) {
	t.Parallel()
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	rdb := redistest.New(t)
	sink := newSteeredSink(t, func(n int) (int, time.Duration) { return 200, 100 * time.Millisecond })
	cfg := steeredConfig(t, schema, rdb, sink.URL, "        concurrency: 2\n")
	gw := proctest.StartWebhookd(t, "gateway", bin, "gateway", cfg)
	proctest.StartWebhookd(t, "worker-1", bin, "worker", cfg)
	proctest.StartWebhookd(t, "worker-2", bin, "worker", cfg)
	ids := sendEvents(t, gw, "evt_conc", 30)
	pipelinetest.Eventually(t, 60*time.Second, "every event delivered", func() bool {
		_, _, d := sink.snapshot()
		return len(d) == len(ids)
	})
	most, _, d := sink.snapshot()
	if most > 2 {
		t.Fatalf("%d calls in flight at once, want at most 2", most)
	}
	if most < 2 {
		t.Fatalf("at most %d call in flight: the limit was never reached, the test proves nothing", most)
	}
	for k, n := range d {
		if n != 1 {
			t.Errorf("%s delivered %d times", k, n)
		}
	}
}

// TestSteeringSlotOfAKilledWorker: concurrency 1; the worker holding the
// only slot is SIGKILLed mid-call; another worker delivers the rest once
// the slot's life (the call's timeout plus a margin) has passed.
func TestSteeringSlotOfAKilledWorker(t *testing.T) {
	t.Parallel()
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	rdb := redistest.New(t)
	arrived := make(chan struct{}, 1)
	hang := make(chan struct{})
	sink := newSteeredSink(t, func(n int) (int, time.Duration) { return 200, 0 })
	t.Cleanup(func() { close(hang) }) // before the sink closes
	sink.Config.Handler = wrapFirst(sink.Config.Handler, arrived, hang)
	cfg := steeredConfig(t, schema, rdb, sink.URL, "        concurrency: 1\n")
	gw := proctest.StartWebhookd(t, "gateway", bin, "gateway", cfg)
	w1 := proctest.StartWebhookd(t, "worker-1", bin, "worker", cfg)
	mustSend(t, gw.URL(), "evt_slot_first", http.StatusAccepted)
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the first call never arrived")
	}
	w1.Kill()
	killedAt := time.Now()
	proctest.StartWebhookd(t, "worker-2", bin, "worker", cfg)
	ids := sendEvents(t, gw, "evt_slot", 3)
	pipelinetest.Eventually(t, 60*time.Second, "the events after the kill delivered", func() bool {
		_, _, d := sink.snapshot()
		for _, id := range ids {
			if d[keyOf(id)] == 0 {
				return false
			}
		}
		return true
	})
	// The slot lives the call's timeout (2s) plus 10s.
	t.Logf("delivered %s after the kill", time.Since(killedAt).Round(time.Millisecond))
}

// wrapFirst makes the first request signal arrived and hang until hang
// closes; the rest go to next.
func wrapFirst(next http.Handler, arrived chan<- struct{}, hang <-chan struct{}) http.Handler {
	var once sync.Once
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first := false
		once.Do(func() { first = true })
		if first {
			arrived <- struct{}{}
			<-hang
			return
		}
		next.ServeHTTP(w, r)
	})
}

// TestSteeringRateAcrossWorkers: rate_limit 5/s, two workers: after the
// first second's burst, the destination's own clock sees about 5 calls a
// second.
func TestSteeringRateAcrossWorkers(t *testing.T) {
	t.Parallel()
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	rdb := redistest.New(t)
	sink := newSteeredSink(t, func(n int) (int, time.Duration) { return 200, 0 })
	cfg := steeredConfig(t, schema, rdb, sink.URL, "        rate_limit: 5/s\n")
	gw := proctest.StartWebhookd(t, "gateway", bin, "gateway", cfg)
	proctest.StartWebhookd(t, "worker-1", bin, "worker", cfg)
	proctest.StartWebhookd(t, "worker-2", bin, "worker", cfg)
	ids := sendEvents(t, gw, "evt_rate", 20)
	pipelinetest.Eventually(t, 60*time.Second, "every event delivered", func() bool {
		_, _, d := sink.snapshot()
		return len(d) == len(ids)
	})
	_, calls, _ := sink.snapshot()
	if took := calls[len(calls)-1].Sub(calls[0]); took < 2500*time.Millisecond {
		t.Fatalf("20 calls in %s, want at least 3s at 5/s after a burst of 5", took)
	}
	for i := 5; i < len(calls); i++ {
		n := 0
		for _, c := range calls[5:] {
			if !c.Before(calls[i]) && c.Sub(calls[i]) < time.Second {
				n++
			}
		}
		// GCRA: a second holds at most the rate plus a burst of one
		// second's worth.
		if n > 11 {
			t.Fatalf("%d calls within one second after the burst, want at most 10 (5/s plus a burst of 5)", n)
		}
	}
}

// TestSteeringCircuit: the destination fails 3 calls in a row; no call
// reaches it for the 3s cooldown; then one probe, and once it answers
// again every event ends done, none dead, the calls parked meanwhile
// woken by its success. The failures and the held calls each opened an
// issue, which the successes closed.
func TestSteeringCircuit(t *testing.T) {
	t.Parallel()
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	rdb := redistest.New(t)
	sink := newSteeredSink(t, func(n int) (int, time.Duration) {
		if n <= 3 {
			return 500, 0
		}
		return 200, 0
	})
	cfg := steeredConfig(t, schema, rdb, sink.URL, "        circuit: {failures: 3, cooldown: 3s}\n")
	// One call at a time, so the calls that open the circuit are the
	// only ones out when it opens.
	yaml, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg = proctest.WriteConfig(t, strings.Replace(string(yaml), "  concurrency: 8\n", "  concurrency: 1\n", 1)+"issues:\n  close_after: 5\n")
	gw := proctest.StartWebhookd(t, "gateway", bin, "gateway", cfg)
	w := proctest.StartWebhookd(t, "worker", bin, "worker", cfg)
	ids := sendEvents(t, gw, "evt_circuit", 8)
	pipelinetest.Eventually(t, 60*time.Second, "every run done", func() bool {
		return schema.Int(t, `SELECT count(*) FROM job_runs WHERE status = 'done'`) == len(ids)
	})
	if n := schema.Int(t, `SELECT count(*) FROM job_runs WHERE status = 'dead'`); n != 0 {
		t.Fatalf("%d runs dead, want none: an open circuit holds, it spends no attempt", n)
	}
	_, calls, _ := sink.snapshot()
	if len(calls) < 4 {
		t.Fatalf("%d calls", len(calls))
	}
	if gap := calls[3].Sub(calls[2]); gap < 2*time.Second {
		t.Fatalf("the call after the third failure came %s later, want the circuit to hold it for the 3s cooldown", gap)
	}
	if len(calls) > 4 {
		if gap := calls[4].Sub(calls[3]); gap < 0 {
			t.Fatal("calls out of order")
		}
	}
	// The calls held while it was open were parked for up to ten
	// cooldowns (30 s); the probe's success woke them.
	if took := calls[len(calls)-1].Sub(calls[3]); took > 10*time.Second {
		t.Errorf("the last held call came %s after the probe, want the probe's success to wake the parked calls", took)
	}
	logs := w.Logs()
	if !strings.Contains(logs, "circuit opened") || !strings.Contains(logs, "circuit closed") {
		t.Errorf("the worker did not log the circuit opening and closing")
	}
	// Issues: the three 500s opened one, the calls the circuit held
	// another ("circuit open"); the successes since (close_after: 5)
	// closed both.
	pipelinetest.Eventually(t, 10*time.Second, "both issues closed", func() bool {
		return schema.Int(t, `SELECT count(*) FROM issues WHERE state = 'closed'`) == 2
	})
	if n := schema.Int(t, `SELECT count(*) FROM issues`); n != 2 {
		t.Fatalf("%d issues, want the 500s' and the circuit's", n)
	}
	if n := schema.Int(t, `SELECT count FROM issues WHERE cause = '500'`); n != 3 {
		t.Fatalf("the 500 issue counts %d failures, want 3", n)
	}
	if n := schema.Int(t, `SELECT count FROM issues WHERE cause = 'circuit open'`); n < 1 {
		t.Fatalf("the circuit issue counts %d holds", n)
	}
}

// TestSteeringPauseAcrossProcesses: a destination paused with the CLI gets
// no call on any worker while paused; events are still accepted, and
// shown held (paused, until resumed) by the CLI's list and detail; the
// holds are no failures in Asynq's queue statistics (what its dashboard's
// error rate reads) and spend no attempt; after resume each is delivered
// once.
func TestSteeringPauseAcrossProcesses(t *testing.T) {
	t.Parallel()
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	rdb := redistest.New(t)
	sink := newSteeredSink(t, func(n int) (int, time.Duration) { return 200, 0 })
	cfg := steeredConfig(t, schema, rdb, sink.URL, "")
	gw := proctest.StartWebhookd(t, "gateway", bin, "gateway", cfg)
	proctest.StartWebhookd(t, "worker-1", bin, "worker", cfg)
	proctest.StartWebhookd(t, "worker-2", bin, "worker", cfg)
	cli := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append(args, "--server", gw.URL())...)
		cmd.Env = append(os.Environ(), "DATABASE_URL=", "REDIS_URL=", "WEBHOOKD_ADMIN_TOKEN="+steeringToken)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("webhookd %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if out := cli("destinations", "pause", "test", "sink", "--reason", "owner's incident"); !strings.Contains(out, "test/sink is paused") {
		t.Fatalf("pause: %s", out)
	}
	time.Sleep(2500 * time.Millisecond) // every process reads the pause within 2s
	ids := sendEvents(t, gw, "evt_paused", 10)
	time.Sleep(3 * time.Second)
	if _, calls, _ := sink.snapshot(); len(calls) != 0 {
		t.Fatalf("%d calls while paused", len(calls))
	}
	if out := cli("destinations", "list"); !strings.Contains(out, "paused") || !strings.Contains(out, "owner's incident") {
		t.Fatalf("list while paused:\n%s", out)
	}
	if out := cli("events", "list", "--state", "held"); !strings.Contains(out, "10 events match") {
		t.Errorf("events list --state held while paused:\n%s", out)
	}
	if out := cli("events", "show", "test", ids[0]); !strings.Contains(out, "held (paused, until resumed)") {
		t.Errorf("events show while paused:\n%s", out)
	}
	queueFailures := func() (failed, processed int) {
		info, err := asynq.NewInspectorFromRedisClient(rdb.Client).GetQueueInfo(rdb.Queue)
		if err != nil {
			t.Fatal(err)
		}
		return info.FailedTotal, info.ProcessedTotal
	}
	if failed, processed := queueFailures(); failed != 0 {
		t.Errorf("while paused: the queue counts %d failures of %d processed; holds are no failures", failed, processed)
	}
	resumedAt := time.Now()
	cli("destinations", "resume", "test", "sink")
	pipelinetest.Eventually(t, 30*time.Second, "every event delivered after the resume", func() bool {
		_, _, d := sink.snapshot()
		return len(d) == len(ids)
	})
	t.Logf("all %d delivered %s after the resume", len(ids), time.Since(resumedAt).Round(time.Millisecond))
	time.Sleep(time.Second)
	_, calls, d := sink.snapshot()
	if len(calls) != len(ids) {
		t.Fatalf("%d calls for %d events, want each once", len(calls), len(ids))
	}
	for k, n := range d {
		if n != 1 {
			t.Errorf("%s delivered %d times", k, n)
		}
	}
	if failed, _ := queueFailures(); failed != 0 {
		t.Errorf("after the resume: the queue counts %d failures; no call failed", failed)
	}
	if n := schema.Int(t, `SELECT count(*) FROM job_runs WHERE attempts > 0`); n != 0 {
		t.Errorf("%d runs spent an attempt on the pause", n)
	}
}
