package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/testkit/pgtest"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/internal/testkit/proctest"
)

// TestReadinessByRole: /readyz answers for what each process is there to
// do (SPEC). With Redis down a gateway (and serve) stays ready and says
// it is degraded, since it goes on recording webhooks, while a worker is
// not ready; with Postgres down no process is. Every answer names each
// dependency's state. At addef08 every role answered 503 with Redis down,
// so a load balancer following our advice dropped every gateway during
// the outage the design absorbs.
func TestReadinessByRole(t *testing.T) {
	t.Parallel()
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	redis := proctest.StartRedis(t)
	dest := newFaultSink(t)
	u, err := url.Parse(schema.URL)
	if err != nil {
		t.Fatal(err)
	}
	pg := proctest.StartProxy(t, u.Host)
	u.Host = pg.Addr
	cfg := proctest.WriteConfig(t, faultConfig(u.String(), redis.URL, "webhookd", dest.URL))
	procs := map[string]*proctest.Process{}
	for _, role := range []string{"gateway", "worker", "serve"} {
		procs[role] = proctest.StartWebhookd(t, role, bin, role, cfg)
	}
	type answer struct {
		code int
		body map[string]any
	}
	ready := func(role string) answer {
		t.Helper()
		resp, err := http.Get(procs[role].URL() + "/readyz")
		if err != nil {
			t.Fatalf("%s /readyz: %v", role, err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var a answer
		a.code = resp.StatusCode
		if err := json.Unmarshal(raw, &a.body); err != nil {
			t.Fatalf("%s /readyz: %s is not JSON: %v", role, raw, err)
		}
		return a
	}
	expect := func(when, role string, code int, postgres, redis string, degraded bool) {
		t.Helper()
		var a answer
		// The dependency watch and the pools notice within a few seconds.
		deadline := time.Now().Add(15 * time.Second)
		for {
			a = ready(role)
			if a.code == code && a.body["postgres"] == postgres && a.body["redis"] == redis && (a.body["degraded"] == true) == degraded {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s /readyz answered %d %v; want %d, postgres %s, redis %s, degraded %v",
					when, role, a.code, a.body, code, postgres, redis, degraded)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	for _, role := range []string{"gateway", "worker", "serve"} {
		expect("all up", role, http.StatusOK, "ok", "ok", false)
	}

	redis.Stop()
	expect("redis down", "gateway", http.StatusOK, "ok", "unreachable", true)
	expect("redis down", "serve", http.StatusOK, "ok", "unreachable", true)
	expect("redis down", "worker", http.StatusServiceUnavailable, "ok", "unreachable", false)
	// What keeps the gateway ready: it records webhooks.
	mustSend(t, procs["gateway"].URL(), "evt_redis_down", http.StatusAccepted)
	redis.Start()
	for _, role := range []string{"gateway", "worker", "serve"} {
		expect("redis back", role, http.StatusOK, "ok", "ok", false)
	}
	pipelinetest.Eventually(t, 30*time.Second, "the event recorded while Redis was down delivered", func() bool {
		return len(dest.callsOf(keyOf("evt_redis_down"))) == 1
	})

	pg.Cut()
	for _, role := range []string{"gateway", "worker", "serve"} {
		expect("postgres down", role, http.StatusServiceUnavailable, "unreachable", "ok", false)
	}
	pg.Restore()
	for _, role := range []string{"gateway", "worker", "serve"} {
		expect("postgres back", role, http.StatusOK, "ok", "ok", false)
	}
}
