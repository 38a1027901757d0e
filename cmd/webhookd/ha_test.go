package main

// High-availability tests (issue 14): webhookd on the engines operators
// run beyond one server, each started by the test from its Debian
// package on private loopback ports and stopped by pid at the end
// (internal/proctest): a 3-node Redis Cluster with queue_shards, a Redis
// master and replica under Sentinel, and a Postgres primary with a
// streaming standby. Each kills something mid-stream and ends with the
// operator's duplicate check.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/internal/testkit/pgtest"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/internal/testkit/proctest"
	"github.com/webhookd/webhookd/internal/testkit/redistest"
	"github.com/webhookd/webhookd/jobs"
)

// haToken is the admin token of the HA tests' processes.
const haToken = "ha-test-admin-token"

// haConfig is faultConfig with its redis_url line replaced by redisYAML
// (redis_sentinel or redis_cluster, and queue_shards) and extra top-level
// lines added.
func haConfig(databaseURL, redisYAML, destURL, extra string) string {
	cfg := faultConfig(databaseURL, "redis://unused", "webhookd", destURL)
	cfg = strings.Replace(cfg, "redis_url: \"redis://unused\"\n", redisYAML, 1)
	return "admin_token: " + haToken + "\n" + extra + cfg
}

// haSenders send events as providers do: each event until a 2xx, again
// every 100ms after a non-2xx or no answer, for up to a minute.
type haSenders struct {
	gateways []string
	mu       sync.Mutex
	acked    map[string]time.Time // event id → when it was acknowledged
	refused  int                  // answers that were not 2xx, or none
	wg       sync.WaitGroup
}

func newHASenders(gateways ...string) *haSenders {
	return &haSenders{gateways: gateways, acked: map[string]time.Time{}}
}

// run sends n events named prefix_<i> at rate per second, spread over
// the gateways, and returns once every one was started (not answered).
func (s *haSenders) run(prefix string, n int, rate float64) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	for i := range n {
		<-tick.C
		id := fmt.Sprintf("%s_%04d", prefix, i)
		gw := s.gateways[i%len(s.gateways)]
		s.wg.Go(func() { s.deliver(gw, id) })
	}
}

func (s *haSenders) deliver(gw, id string) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		code, err := send(gw, id)
		if err == nil && (code == http.StatusAccepted || code == http.StatusOK) {
			s.mu.Lock()
			s.acked[id] = time.Now()
			s.mu.Unlock()
			return
		}
		s.mu.Lock()
		s.refused++
		s.mu.Unlock()
		time.Sleep(100 * time.Millisecond)
	}
}

// wait waits for every sender to finish and returns the acknowledged ids.
func (s *haSenders) wait(t *testing.T, want int) []string {
	t.Helper()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.acked))
	for id := range s.acked {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	if len(ids) != want {
		t.Fatalf("%d of %d events acknowledged within a minute of retries", len(ids), want)
	}
	return ids
}

// firstAckAfter returns how long after at the first event was
// acknowledged, or -1.
func (s *haSenders) firstAckAfter(at time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	first := time.Duration(-1)
	for _, ackAt := range s.acked {
		if d := ackAt.Sub(at); d > 0 && (first < 0 || d < first) {
			first = d
		}
	}
	return first
}

// deliveredOnce waits until every id's key was called and then checks
// that none was called twice.
func deliveredOnce(t *testing.T, dest *faultSink, ids []string, within time.Duration) {
	t.Helper()
	pipelinetest.Eventually(t, within, fmt.Sprintf("all %d acknowledged events delivered", len(ids)), func() bool {
		for _, id := range ids {
			if len(dest.callsOf(keyOf(id))) == 0 {
				return false
			}
		}
		return true
	})
	time.Sleep(time.Second) // give a second call the chance to show up
	if _, repeated := dest.keys(); len(repeated) > 0 {
		t.Fatalf("keys called more than once: %v", repeated)
	}
}

// readyz returns /readyz's status code and body.
func readyz(t *testing.T, base string) (int, string) {
	t.Helper()
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// adminGet GETs an admin path with the HA tests' token.
func adminGet(t *testing.T, base, path string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+haToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestHARedisCluster: a 3-node Redis Cluster, queue_shards: 4, two
// gateways and two workers. 300 events are all delivered exactly once;
// the shards' queues live on more than one node and each served some of
// them; the dashboard lists every shard and the cluster; /readyz is ok.
func TestHARedisCluster(t *testing.T) {
	t.Parallel()
	start := time.Now()
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	cluster := proctest.StartRedisCluster(t, 3)
	dest := newFaultSink(t)
	redisYAML := fmt.Sprintf("redis_cluster:\n  addrs: [%q, %q, %q]\nqueue_shards: 4\n", cluster.Addrs[0], cluster.Addrs[1], cluster.Addrs[2])
	cfg := proctest.WriteConfig(t, haConfig(schema.URL, redisYAML, dest.URL, ""))
	gw1 := proctest.StartWebhookd(t, "gateway-1", bin, "gateway", cfg)
	gw2 := proctest.StartWebhookd(t, "gateway-2", bin, "gateway", cfg)
	proctest.StartWebhookd(t, "worker-1", bin, "worker", cfg)
	proctest.StartWebhookd(t, "worker-2", bin, "worker", cfg)
	t.Logf("cluster and processes up in %s", time.Since(start).Round(time.Millisecond))

	const n = 300
	senders := newHASenders(gw1.URL(), gw2.URL())
	sendStart := time.Now()
	senders.run("evt", n/2, 200)
	// Every node forgets its cached scripts (a restart, a failover to a
	// replica that never ran them): the hand-off's EVALSHA answers
	// NOSCRIPT on whichever node its shard lives, and the script's body
	// is sent again there.
	client := cluster.Client(t)
	if err := client.ForEachMaster(context.Background(), func(ctx context.Context, node *redis.Client) error {
		return node.ScriptFlush(ctx).Err()
	}); err != nil {
		t.Fatal(err)
	}
	senders.run("evt_after_flush", n/2, 200)
	ids := senders.wait(t, n)
	deliveredOnce(t, dest, ids, 30*time.Second)
	t.Logf("%d events acknowledged and delivered once in %s", n, time.Since(sendStart).Round(time.Millisecond))
	pipelinetest.Eventually(t, 10*time.Second, "every run done", func() bool {
		return schema.Int(t, `SELECT count(*) FROM job_runs WHERE status = 'done'`) == n
	})

	shards := jobs.Shards{Queue: "webhookd", N: 4}
	nodes := map[string]bool{}
	for _, q := range shards.Names() {
		node, err := client.MasterForKey(context.Background(), "asynq:{"+q+"}:pending")
		if err != nil {
			t.Fatal(err)
		}
		nodes[node.Options().Addr] = true
	}
	if len(nodes) < 2 {
		t.Errorf("the 4 shards' queues all live on %v; want them spread over nodes", nodes)
	}

	if code, body := adminGet(t, gw1.URL(), "/admin/queues/"); code != http.StatusOK || !strings.Contains(string(body), "<html") {
		t.Fatalf("dashboard: HTTP %d %.200s", code, body)
	}
	type queueListing struct {
		Queues []struct {
			Queue     string `json:"queue"`
			Processed int    `json:"processed"`
		} `json:"queues"`
	}
	listQueues := func() (listed queueListing, processed int) {
		code, body := adminGet(t, gw2.URL(), "/admin/queues/api/queues")
		if code != http.StatusOK {
			t.Fatalf("dashboard queues API: HTTP %d %.300s", code, body)
		}
		if err := json.Unmarshal(body, &listed); err != nil {
			t.Fatalf("dashboard queues API: %v: %.300s", err, body)
		}
		for _, q := range listed.Queues {
			processed += q.Processed
		}
		return listed, processed
	}
	// Asynq counts a task processed when the worker tells it the task is
	// done, just after the run's outcome is stored: the last few may be
	// counted a moment after every run reads done.
	listed, processed := listQueues()
	for deadline := time.Now().Add(5 * time.Second); processed < n && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		listed, processed = listQueues()
	}
	var names []string
	for _, q := range listed.Queues {
		names = append(names, q.Queue)
		if q.Processed == 0 {
			t.Errorf("dashboard: shard %s processed nothing", q.Queue)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, shards.Names()) {
		t.Errorf("dashboard lists queues %v, want %v", names, shards.Names())
	}
	if processed < n {
		t.Errorf("dashboard: %d tasks processed over the shards, want at least %d", processed, n)
	}
	if code, body := adminGet(t, gw1.URL(), "/admin/queues/api/redis_info"); code != http.StatusOK || !strings.Contains(string(body), `"cluster":true`) {
		t.Errorf("dashboard redis info: HTTP %d %.300s", code, body)
	}
	if code, body := readyz(t, gw1.URL()); code != http.StatusOK {
		t.Errorf("/readyz: %d %s", code, body)
	}
	// The operator's CLI on the cluster: a forced replay writes the new
	// generation's task into its own shard, and a worker delivers it.
	replayed := ids[0]
	cmd := exec.Command(bin, "replay", "test", replayed, "--force", "--destination", "sink", "--reason", "ha test", "--server", gw1.URL())
	cmd.Env = append(os.Environ(), "DATABASE_URL=", "REDIS_URL=", "WEBHOOKD_ADMIN_TOKEN="+haToken)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("webhookd replay --force: %v\n%s", err, out)
	}
	pipelinetest.Eventually(t, 15*time.Second, "the forced replay delivered", func() bool {
		return len(dest.callsOf(keyOf(replayed)+"#2")) == 1
	})
	checkNoDuplicates(t, bin, cfg)
	t.Logf("took %s", time.Since(start).Round(time.Millisecond))
}

// TestHARedisSentinel: a Redis master, its replica and one sentinel; a
// gateway and a worker find the master through the sentinel. Mid-stream
// the master is SIGKILLed; the sentinel promotes the replica, the
// processes follow it, and every acknowledged event is delivered exactly
// once (what the replica missed, recovery writes again from Postgres).
func TestHARedisSentinel(t *testing.T) {
	t.Parallel()
	start := time.Now()
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	sentinel := proctest.StartRedisSentinel(t)
	dest := newFaultSink(t)
	redisYAML := fmt.Sprintf("redis_sentinel:\n  master: %s\n  addrs: [%q]\n", sentinel.Master, sentinel.SentinelAddr)
	cfg := proctest.WriteConfig(t, haConfig(schema.URL, redisYAML, dest.URL, ""))
	gw := proctest.StartWebhookd(t, "gateway", bin, "gateway", cfg)
	proctest.StartWebhookd(t, "worker", bin, "worker", cfg)

	const n = 600 // 6s at 100/s, the kill after 2s
	senders := newHASenders(gw.URL())
	done := make(chan struct{})
	go func() { senders.run("evt", n, 100); close(done) }()
	time.Sleep(2 * time.Second)
	sentinel.KillMaster()
	killedAt := time.Now()
	t.Logf("master %s killed", sentinel.MasterAddr)
	resumed := firstDoneAfter(t, schema, killedAt)
	pipelinetest.Eventually(t, 30*time.Second, "the sentinel to promote the replica", func() bool {
		addr, err := sentinel.CurrentMaster(context.Background())
		return err == nil && addr == sentinel.ReplicaAddr
	})
	promoted := time.Since(killedAt)
	<-done
	ids := senders.wait(t, n)
	deliveredOnce(t, dest, ids, 60*time.Second)
	pipelinetest.Eventually(t, 10*time.Second, "every run done", func() bool {
		return schema.Int(t, `SELECT count(*) FROM job_runs WHERE status = 'done'`) == n
	})
	if code, body := readyz(t, gw.URL()); code != http.StatusOK {
		t.Errorf("/readyz after the failover: %d %s", code, body)
	}
	if code, body := adminGet(t, gw.URL(), "/admin/queues/api/queues"); code != http.StatusOK || !strings.Contains(string(body), `"queue":"webhookd"`) {
		t.Errorf("dashboard queues API after the failover: HTTP %d %.300s", code, body)
	}
	t.Logf("REDIS FAILOVER: replica promoted %s after the kill; first event received after the kill done %s after it; all %d delivered once; %d answers not 2xx (retried)",
		promoted.Round(time.Millisecond), (<-resumed).Round(time.Millisecond), n, senders.refused)
	checkNoDuplicates(t, bin, cfg)
	t.Logf("took %s", time.Since(start).Round(time.Millisecond))
}

// firstDoneAfter returns a channel that receives how long after at the
// first run of an event received after at was done (or a minute, if
// none was).
func firstDoneAfter(t *testing.T, schema interface {
	Int(testing.TB, string, ...any) int
}, at time.Time) <-chan time.Duration {
	out := make(chan time.Duration, 1)
	go func() {
		for time.Since(at) < time.Minute {
			var n int
			func() {
				defer func() { _ = recover() }()
				n = schema.Int(t, `SELECT count(*) FROM job_runs r JOIN events e USING (source, external_id)
WHERE e.received_at > $1 AND r.status = 'done'`, at)
			}()
			if n > 0 {
				out <- time.Since(at)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		out <- time.Minute
	}()
	return out
}

// TestHAPostgresFailover: a Postgres primary with a synchronous
// streaming standby, named together in a multi-host database_url with
// target_session_attrs=read-write; a gateway and a worker. Mid-stream
// the primary crashes (SIGQUIT, as pg_ctl stop -m immediate) and the
// standby is promoted a second later. Meanwhile the gateway answers 503
// (never a 2xx for an event it could not record) and /readyz names
// postgres; the senders retry; every event acknowledged, before or after,
// is on the new primary and delivered exactly once.
func TestHAPostgresFailover(t *testing.T) {
	t.Parallel()
	start := time.Now()
	bin := proctest.Binary(t)
	pg := proctest.StartPostgresPair(t)
	rdb := redistest.New(t)
	dest := newFaultSink(t)
	cfg := proctest.WriteConfig(t, strings.Replace(
		faultConfig(pg.URL, rdb.URL, rdb.Queue, dest.URL), "lease: 3s", "lease: 20s", 1))
	gw := proctest.StartWebhookd(t, "gateway", bin, "gateway", cfg)
	proctest.StartWebhookd(t, "worker", bin, "worker", cfg)
	t.Logf("postgres pair and processes up in %s", time.Since(start).Round(time.Millisecond))

	const n = 500 // 5s at 100/s, the crash after 1.5s
	senders := newHASenders(gw.URL())
	done := make(chan struct{})
	go func() { senders.run("evt", n, 100); close(done) }()
	time.Sleep(1500 * time.Millisecond)
	pg.Primary.Crash()
	crashedAt := time.Now()

	// Down: ingest refuses, readiness names postgres, Redis is fine.
	code, body := readyz(t, gw.URL())
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"postgres":"unreachable"`) || !strings.Contains(body, `"redis":"ok"`) {
		t.Errorf("/readyz with the primary down: %d %s; want 503 naming postgres", code, body)
	}
	if code, err := send(gw.URL(), "evt_during_outage"); err != nil || code != http.StatusServiceUnavailable {
		t.Errorf("a webhook with the primary down: HTTP %d (%v), want 503", code, err)
	}
	time.Sleep(time.Second)
	pg.Standby.Promote()
	promotedAt := time.Now()
	<-done
	ids := senders.wait(t, n)
	// Answers in flight at the crash may still arrive in its first 100ms.
	firstAck := senders.firstAckAfter(crashedAt.Add(100*time.Millisecond)) + 100*time.Millisecond
	deliveredOnce(t, dest, ids, 60*time.Second)
	pipelinetest.Eventually(t, 30*time.Second, "every run done on the new primary", func() bool {
		return pg.Standby.Int(t, "webhookd", `SELECT count(*) FROM job_runs WHERE status = 'done'`) == n
	})
	got := pg.Standby.Int(t, "webhookd", `SELECT count(*) FROM events WHERE external_id = ANY($1)`, ids)
	if got != n {
		t.Fatalf("%d of the %d acknowledged events are on the new primary", got, n)
	}
	if code, body := readyz(t, gw.URL()); code != http.StatusOK {
		t.Errorf("/readyz after the failover: %d %s", code, body)
	}
	t.Logf("POSTGRES FAILOVER: standby promoted %s after the crash; first 2xx %s after the crash; all %d delivered once %s after the crash; %d answers not 2xx (retried)",
		promotedAt.Sub(crashedAt).Round(time.Millisecond), firstAck.Round(time.Millisecond),
		n, time.Since(crashedAt).Round(time.Millisecond), senders.refused)
	if senders.refused == 0 {
		t.Errorf("no sender was refused: the crash fell outside the stream")
	}
	checkNoDuplicates(t, bin, cfg)
	t.Logf("took %s", time.Since(start).Round(time.Millisecond))
}

// TestHAQueueShardsChange: queue_shards goes from 1 to 4 and then to 2
// on a running system. Events acknowledged under the old count have
// their tasks in the old queues, no worker running; the workers started
// with the new count serve those queues too (they are listed in Redis),
// so every event is delivered once without waiting for recovery
// (recovery_min_age is an hour here; TestShardCountChange covers
// recovery writing tasks into their new shards).
func TestHAQueueShardsChange(t *testing.T) {
	t.Parallel()
	start := time.Now()
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	rdb := redistest.New(t)
	dest := newFaultSink(t)
	config := func(shards int) string {
		cfg := faultConfig(schema.URL, rdb.URL, rdb.Queue, dest.URL)
		cfg = strings.Replace(cfg, "recovery_min_age: 300ms", "recovery_min_age: 1h", 1)
		return proctest.WriteConfig(t, fmt.Sprintf("queue_shards: %d\n%s", shards, cfg))
	}
	var all []string
	for _, step := range []struct{ from, to int }{{1, 4}, {4, 2}} {
		prefix := fmt.Sprintf("evt_%d_to_%d", step.from, step.to)
		gw := proctest.StartWebhookd(t, "gateway-"+prefix, bin, "gateway", config(step.from))
		senders := newHASenders(gw.URL())
		senders.run(prefix, 40, 200)
		ids := senders.wait(t, 40)
		all = append(all, ids...)
		if err := gw.Terminate(10 * time.Second); err != nil {
			t.Fatalf("stopping the gateway: %v", err)
		}
		old := jobs.Shards{Queue: rdb.Queue, N: step.from}
		pending := 0
		for _, q := range old.Names() {
			pending += int(pendingTasks(rdb.Client, q))
		}
		if pending != 40 {
			insp := asynq.NewInspectorFromRedisClient(rdb.Client)
			for _, q := range old.Names() {
				info, err := insp.GetQueueInfo(q)
				t.Logf("%s: %+v %v", q, info, err)
			}
			t.Fatalf("%d tasks pending in the queues of queue_shards %d, want 40", pending, step.from)
		}
		w := proctest.StartWebhookd(t, "worker-"+prefix, bin, "worker", config(step.to))
		deliveredOnce(t, dest, all, 30*time.Second)
		if !strings.Contains(w.Logs(), "also serving the queues of an earlier queue_shards") {
			t.Errorf("the worker with queue_shards %d did not say it serves the old queues", step.to)
		}
		if err := w.Terminate(10 * time.Second); err != nil {
			t.Fatalf("stopping the worker: %v", err)
		}
	}
	pipelinetest.Eventually(t, 10*time.Second, "every run done", func() bool {
		return schema.Int(t, `SELECT count(*) FROM job_runs WHERE status = 'done'`) == len(all)
	})
	checkNoDuplicates(t, bin, config(2))
	t.Logf("took %s", time.Since(start).Round(time.Millisecond))
}
