package main

// Recovery tests: one per way acknowledged work used to be lost when
// faults combined (issue 17), each with real processes, real Postgres and
// Redis, and real kills. Recovery must be driven by what Postgres records:
// none of these may depend on a marker or lease kept in Redis.

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/internal/testkit/pgtest"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/internal/testkit/proctest"
	"github.com/webhookd/webhookd/internal/testkit/redistest"
)

// recoveryBound is SPEC's bound for recovering a worker killed mid-call
// or before its claim: lease + lease/2 + 10s, with faultConfig's 3s lease.
const recoveryBound = 3*time.Second + 1500*time.Millisecond + 10*time.Second

// dropQueue deletes every key of Asynq's queue and leaves the rest (such
// as a marker of webhookd's own): what a Redis failover to a replica that
// missed the latest writes, or an operator's mistaken delete, leaves.
func dropQueue(t *testing.T, rdb *redis.Client, queue string) {
	t.Helper()
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, "asynq:{"+queue+"}:*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 {
		t.Fatalf("queue %s has no keys to drop", queue)
	}
	if err := rdb.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("dropped %d keys of queue %s", len(keys), queue)
}

// pendingTasks returns the length of the queue's pending list.
func pendingTasks(rdb *redis.Client, queue string) int64 {
	return rdb.LLen(context.Background(), "asynq:{"+queue+"}:pending").Val()
}

// everyDelivered waits until each id's key has been called and every
// run is done, each within the given time.
func everyDelivered(t *testing.T, schema *pgtest.Schema, dest *faultSink, ids []string, within time.Duration) {
	t.Helper()
	pipelinetest.Eventually(t, within, fmt.Sprintf("all %d events delivered", len(ids)), func() bool {
		for _, id := range ids {
			if len(dest.callsOf(keyOf(id))) == 0 {
				return false
			}
		}
		return true
	})
	pipelinetest.Eventually(t, within, "every run done", func() bool {
		return schema.Int(t, `SELECT count(*) FROM job_runs WHERE status = 'done'`) == len(ids)
	})
}

// noneTwice checks that no key was called twice, after giving a second
// call the chance to show up.
func noneTwice(t *testing.T, dest *faultSink) {
	t.Helper()
	time.Sleep(time.Second)
	if _, repeated := dest.keys(); len(repeated) > 0 {
		t.Fatalf("keys called more than once: %v", repeated)
	}
}

func eventIDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s_%02d", prefix, i)
	}
	return ids
}

// TestRecoveryLossNoticedByAProcessThatDies: events are acknowledged and
// their tasks queued with no worker running; Redis restarts empty; the
// only process running dies the moment Redis tells it that tasks are
// missing, after writing back the first batch of them and before the
// rest. Processes started afterwards still recover every event (the
// first to notice used to leave a marker saying the loss was dealt with).
func TestRecoveryLossNoticedByAProcessThatDies(t *testing.T) {
	t.Parallel()
	faulty := proctest.Binary(t, "faultinject")
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	rs := proctest.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(rs.Port)})
	t.Cleanup(func() { _ = rdb.Close() })
	dest := newFaultSink(t)
	cfg := proctest.WriteConfig(t, faultConfig(schema.URL, rs.URL, "webhookd", dest.URL))
	gw := proctest.StartWebhookd(t, "gateway-faulty", faulty, "gateway", cfg, "WEBHOOKD_FAULT=exit-on-lost-task")
	// More events than recovery writes back in one script call (500).
	ids := eventIDs("evt_lost", 600)
	sendAll(t, gw.URL(), ids)
	pipelinetest.Eventually(t, 10*time.Second, "the tasks queued", func() bool { return pendingTasks(rdb, "webhookd") == int64(len(ids)) })

	rs.Stop()
	rs.Start()
	if code := gw.Wait(20 * time.Second); code != 3 {
		t.Fatalf("the gateway exited %d, want 3: it should have died on noticing the loss", code)
	}
	if n := pendingTasks(rdb, "webhookd"); n >= int64(len(ids)) {
		t.Fatalf("%d tasks queued when the gateway died, want fewer than %d: it died mid-pass", n, len(ids))
	}
	proctest.StartWebhookd(t, "gateway-2", bin, "gateway", cfg)
	proctest.StartWebhookd(t, "worker", bin, "worker", cfg)
	everyDelivered(t, schema, dest, ids, 60*time.Second)
	noneTwice(t, dest)
	checkNoDuplicates(t, bin, cfg)
}

// sendAll sends each event once, 16 at a time, and fails the test unless
// each is accepted.
func sendAll(t *testing.T, gatewayURL string, ids []string) {
	t.Helper()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for _, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if code, err := send(gatewayURL, id); err != nil || code != http.StatusAccepted {
				t.Errorf("sending %s: HTTP %d, %v; want 202", id, code, err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// TestRecoveryQueueLostBehindAnIntactMarker: Redis keeps everything but
// the queue's keys (a failover to a replica that missed the latest
// writes). Every acknowledged event is still delivered once.
func TestRecoveryQueueLostBehindAnIntactMarker(t *testing.T) {
	t.Parallel()
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	rdb := redistest.New(t)
	dest := newFaultSink(t)
	cfg := proctest.WriteConfig(t, faultConfig(schema.URL, rdb.URL, rdb.Queue, dest.URL))
	gw := proctest.StartWebhookd(t, "gateway", bin, "gateway", cfg)
	ids := eventIDs("evt_behind", 10)
	for _, id := range ids {
		mustSend(t, gw.URL(), id, http.StatusAccepted)
	}
	pipelinetest.Eventually(t, 10*time.Second, "10 tasks queued", func() bool { return pendingTasks(rdb.Client, rdb.Queue) == 10 })
	time.Sleep(time.Second) // what used to mark them handed off has run
	dropQueue(t, rdb.Client, rdb.Queue)
	proctest.StartWebhookd(t, "worker", bin, "worker", cfg)
	everyDelivered(t, schema, dest, ids, 30*time.Second)
	noneTwice(t, dest)
	checkNoDuplicates(t, bin, cfg)
}

// TestRecoveryRetryLostWithRedis: a first call fails, its retry is
// scheduled in Redis, and Redis loses it. The retry still happens once
// its time is due (it used to wait for the overdue-retry check, about an
// hour by default).
func TestRecoveryRetryLostWithRedis(t *testing.T) {
	t.Parallel()
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	rdb := redistest.New(t)
	dest := newFaultSink(t)
	dest.hook = func(_ string, n int, w http.ResponseWriter, _ *http.Request) bool {
		if n == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			return true
		}
		return false
	}
	yaml := strings.NewReplacer("retry_base: 100ms", "retry_base: 4s", "retry_max: 1s", "retry_max: 8s").
		Replace(faultConfig(schema.URL, rdb.URL, rdb.Queue, dest.URL))
	cfg := proctest.WriteConfig(t, yaml)
	srv := proctest.StartWebhookd(t, "serve", bin, "serve", cfg)
	// Let start-up work finish first (earlier versions checked a queue
	// marker at start, which would have recovered the retry by chance).
	time.Sleep(time.Second)
	mustSend(t, srv.URL(), "evt_retry", http.StatusAccepted)
	pipelinetest.Eventually(t, 10*time.Second, "the first call to fail", func() bool {
		return schema.Int(t, `SELECT count(*) FROM job_runs WHERE status = 'failed' AND attempts = 1`) == 1
	})
	pipelinetest.Eventually(t, 5*time.Second, "the retry scheduled in Redis", func() bool {
		return rdb.Client.ZCard(context.Background(), "asynq:{"+rdb.Queue+"}:retry").Val() == 1
	})
	dropQueue(t, rdb.Client, rdb.Queue)
	lostAt := time.Now()
	everyDelivered(t, schema, dest, []string{"evt_retry"}, 30*time.Second)
	time.Sleep(time.Second) // give a third call the chance to show up
	if c := dest.callsOf(keyOf("evt_retry")); len(c) != 2 || c[1] != "2" {
		t.Fatalf("calls %v, want the failed one and the retry (attempt 2)", c)
	}
	t.Logf("retry delivered %s after Redis lost it (backoff 2–4s)", time.Since(lostAt).Round(time.Millisecond))
	checkNoDuplicates(t, bin, cfg)
}

// TestRecoveryLeaseExpiresWhileRedisIsDown: a worker is killed mid-call;
// Redis becomes unreachable before its lease passes and answers again
// after. The run is retried with the same key within SPEC's bound of
// Redis answering (the sweep's enqueue used to fail and be left to the
// overdue-retry check, and the dead worker's task to Asynq's recoverer).
func TestRecoveryLeaseExpiresWhileRedisIsDown(t *testing.T) {
	t.Parallel()
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	rdb := redistest.New(t)
	u, err := url.Parse(rdb.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := proctest.StartProxy(t, u.Host)
	u.Host = proxy.Addr
	dest := newFaultSink(t)
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	dest.hook = func(key string, n int, _ http.ResponseWriter, _ *http.Request) bool {
		if key == keyOf("evt_victim") && n == 1 {
			arrived <- struct{}{}
			<-release
		}
		return false
	}
	cfg := proctest.WriteConfig(t, faultConfig(schema.URL, u.String(), rdb.Queue, dest.URL))
	gw := proctest.StartWebhookd(t, "gateway", bin, "gateway", cfg)
	w1 := proctest.StartWebhookd(t, "worker-1", bin, "worker", cfg)
	mustSend(t, gw.URL(), "evt_victim", http.StatusAccepted)
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the victim's call never reached the destination")
	}
	// A second worker is up throughout, as in production.
	proctest.StartWebhookd(t, "worker-2", bin, "worker", cfg)
	w1.Kill()
	proxy.Cut()
	// The lease (3s) passes while Redis is unreachable: the run is taken
	// back in Postgres, and its task cannot be written.
	pipelinetest.Eventually(t, 20*time.Second, "the run taken back while Redis is down", func() bool {
		return schema.Int(t, `SELECT count(*) FROM job_runs WHERE key = $1 AND status = 'failed' AND attempts = 1`, keyOf("evt_victim")) == 1
	})
	time.Sleep(time.Second)
	proxy.Restore()
	restoredAt := time.Now()
	pipelinetest.Eventually(t, 2*recoveryBound, "the victim's run done", func() bool {
		return schema.Int(t, `SELECT count(*) FROM job_runs WHERE key = $1 AND status = 'done'`, keyOf("evt_victim")) == 1
	})
	took := time.Since(restoredAt)
	t.Logf("victim done %s after Redis answered again", took.Round(time.Millisecond))
	if took > recoveryBound {
		t.Fatalf("recovered %s after Redis answered again, want within %s", took.Round(time.Millisecond), recoveryBound)
	}
	if c := dest.callsOf(keyOf("evt_victim")); len(c) != 2 || c[1] != "2" {
		t.Fatalf("calls %v, want the killed call and its retry (attempt 2)", c)
	}
}

// workerDiesAt runs a gateway and a worker built to exit at fault, sends
// event id, and waits for the worker to die there. It returns the normal
// binary, the schema, the destination and the config, for the test to
// start the worker that recovers.
func workerDiesAt(t *testing.T, fault, id string) (string, *pgtest.Schema, *faultSink, string) {
	t.Helper()
	faulty := proctest.Binary(t, "faultinject")
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	rdb := redistest.New(t)
	dest := newFaultSink(t)
	cfg := proctest.WriteConfig(t, faultConfig(schema.URL, rdb.URL, rdb.Queue, dest.URL))
	gw := proctest.StartWebhookd(t, "gateway", bin, "gateway", cfg)
	w := proctest.StartWebhookd(t, "worker-faulty", faulty, "worker", cfg, "WEBHOOKD_FAULT="+fault)
	mustSend(t, gw.URL(), id, http.StatusAccepted)
	if code := w.Wait(30 * time.Second); code != 3 {
		t.Fatalf("faulty worker exited %d, want 3 (the injected fault %s)", code, fault)
	}
	return bin, schema, dest, cfg
}

// TestRecoveryWorkerKilledBeforeClaim: a worker takes a task and dies
// before claiming its key, leaving the task active in Redis for a worker
// that is gone and no run in Postgres. Another worker delivers it within
// SPEC's bound (it used to take Asynq's 30s lease and its once-a-minute
// recoverer).
func TestRecoveryWorkerKilledBeforeClaim(t *testing.T) {
	t.Parallel()
	bin, schema, dest, cfg := workerDiesAt(t, "exit-before-claim", "evt_taken")
	killedAt := time.Now()
	if n := schema.Int(t, `SELECT count(*) FROM job_runs`); n != 0 {
		t.Fatalf("%d runs after a kill before the claim, want 0", n)
	}
	proctest.StartWebhookd(t, "worker-2", bin, "worker", cfg)
	pipelinetest.Eventually(t, 2*recoveryBound, "the event delivered", func() bool { return len(dest.callsOf(keyOf("evt_taken"))) == 1 })
	took := time.Since(killedAt)
	t.Logf("delivered %s after the kill", took.Round(time.Millisecond))
	if took > recoveryBound {
		t.Fatalf("delivered %s after the kill, want within %s", took.Round(time.Millisecond), recoveryBound)
	}
	everyDelivered(t, schema, dest, []string{"evt_taken"}, 10*time.Second)
	noneTwice(t, dest)
	checkNoDuplicates(t, bin, cfg)
}

// TestRecoveryAuditCountsCrashDuplicates: a worker dies between the
// destination's 2xx and storing it; the retry (same key) succeeds too, so
// the destination saw the key succeed twice. The duplicate audit cannot
// see a success that was never stored, but it counts the call of unknown
// outcome, and the event's page shows it.
func TestRecoveryAuditCountsCrashDuplicates(t *testing.T) {
	t.Parallel()
	bin, schema, dest, cfg := workerDiesAt(t, "exit-after-call", "evt_twice")
	proctest.StartWebhookd(t, "worker-2", bin, "worker", cfg)
	everyDelivered(t, schema, dest, []string{"evt_twice"}, 2*recoveryBound)
	time.Sleep(time.Second) // give a third call the chance to show up
	if c := dest.callsOf(keyOf("evt_twice")); len(c) != 2 {
		t.Fatalf("destination saw calls %v, want 2 (the one whose outcome was lost, and the retry)", c)
	}
	out, unknown, err := auditDuplicates(t, bin, cfg)
	if err != nil {
		t.Fatalf("the audit found successes stored twice: %v\n%s", err, out)
	}
	if unknown < 1 {
		t.Fatalf("the audit counted %d calls of unknown outcome, want at least the destination's 1 duplicate success:\n%s", unknown, out)
	}
	if !strings.Contains(out, "unknown\t"+keyOf("evt_twice")+"\tcall 1") || !strings.Contains(out, "a later call succeeded") {
		t.Fatalf("the audit does not name the call:\n%s", out)
	}
}

// auditSummaryRE reads the summary line of `webhookd check duplicates`.
var auditSummaryRE = regexp.MustCompile(`: (\d+) keys called successfully more than once; (\d+) calls of unknown outcome`)

// auditDuplicates runs `webhookd check duplicates` and returns its output,
// its count of calls of unknown outcome, and its exit error (set when it
// found keys whose successes were stored twice).
func auditDuplicates(t *testing.T, bin, config string) (string, int, error) {
	t.Helper()
	cmd := exec.Command(bin, "check", "duplicates", "--config", config)
	cmd.Env = append(os.Environ(), "DATABASE_URL=", "REDIS_URL=")
	b, err := cmd.CombinedOutput()
	out := string(b)
	m := auditSummaryRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no summary in the audit's output (%v):\n%s", err, out)
	}
	unknown, _ := strconv.Atoi(m[2])
	return out, unknown, err
}
