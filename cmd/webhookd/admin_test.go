package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd"
	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/logtest"
	"github.com/webhookd/webhookd/internal/pgtest"
	"github.com/webhookd/webhookd/internal/pipelinetest"
	"github.com/webhookd/webhookd/internal/redistest"
	"github.com/webhookd/webhookd/internal/sink"
)

const e2eSecret = "whsec_e2e_admin_test_secret"

func startProcess(t *testing.T, token string) (string, *config, *pgtest.Schema, *sink.Sink, *logtest.Buffer) {
	t.Helper()
	schema := pgtest.New(t)
	rdb := redistest.New(t)
	dest := sink.New(nil)
	ds := httptest.NewServer(dest)
	t.Cleanup(ds.Close)
	raw := fmt.Sprintf(`
listen: 127.0.0.1:0
database_url: %q
redis_url: %q
queue: %q
admin_token: %q
lease: 2s
worker:
  recovery_interval: 300ms
  recovery_min_age: 200ms
  retry_base: 100ms
  retry_max: 1s
sources:
  - name: stripe
    verify: {scheme: stripe, secrets: [%q]}
    destinations:
      - {name: sink, url: %q, timeout: 1s, max_attempts: 3}
`, schema.URL, rdb.URL, rdb.Queue, token, e2eSecret, ds.URL)
	cfg, err := parseConfig("test.yaml", []byte(raw), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	logs := &logtest.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	pcfg, err := cfg.process(webhookd.Roles{Gateway: true, Worker: true})
	if err != nil {
		t.Fatal(err)
	}
	p, err := webhookd.Start(context.Background(), pcfg, log)
	if err != nil {
		t.Fatalf("process did not start: %v\n%s", err, logs.String())
	}
	t.Cleanup(func() {
		if err := p.Stop(context.Background()); err != nil {
			t.Errorf("process: %v", err)
		}
		if t.Failed() {
			t.Logf("process logs:\n%s", logs.String())
		}
	})
	return "http://" + p.Addr().String(), cfg, schema, dest, logs
}

func sendSigned(t *testing.T, base string, cfg *config, id string, secretOK bool) int {
	t.Helper()
	body := []byte(`{"id":"` + id + `","type":"invoice.paid"}`)
	vc := cfg.Sources[0].verifyConfig()
	if !secretOK {
		vc.Secrets = []string{"whsec_wrong"}
	}
	h, _, err := verify.Sign(vc, body, time.Now(), id)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", base+"/webhooks/stripe", bytes.NewReader(body))
	req.Header = h
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func jsonLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Errorf("log line is not JSON: %s", sc.Text())
			continue
		}
		out = append(out, m)
	}
	return out
}

func TestProcessMetricsAndLogs(t *testing.T) {
	t.Parallel()
	base, cfg, schema, dest, logs := startProcess(t, "e2e-token")

	if code := sendSigned(t, base, cfg, "evt_e2e_1", true); code != http.StatusAccepted {
		t.Fatalf("first delivery: %d", code)
	}
	if code := sendSigned(t, base, cfg, "evt_e2e_1", true); code != http.StatusOK {
		t.Fatalf("repeat delivery: %d", code)
	}
	if code := sendSigned(t, base, cfg, "evt_e2e_2", false); code != http.StatusUnauthorized {
		t.Fatalf("bad signature: %d", code)
	}
	// A run whose worker died: the sweeper resets it and it is retried.
	ctx := t.Context()
	if _, err := schema.Pool.Exec(ctx, `
INSERT INTO events (source, external_id, payload, content_type) VALUES ('stripe', 'evt_crashed', '{"id":"evt_crashed"}', 'application/json');
INSERT INTO job_runs (key, source, external_id, destination, status, calls, max_attempts, started_at, lease_until)
VALUES ('stripe:sink:evt_crashed', 'stripe', 'evt_crashed', 'sink', 'running', 1, 3, now() - interval '1 minute', now() - interval '1 second')`); err != nil {
		t.Fatal(err)
	}
	pipelinetest.Eventually(t, 30*time.Second, "both events delivered", func() bool {
		return dest.Count("stripe:sink:evt_e2e_1") == 1 && dest.Count("stripe:sink:evt_crashed") == 1
	})

	// Admin needs the token.
	if code, _ := get(t, base+"/admin/events", ""); code != http.StatusUnauthorized {
		t.Errorf("admin without token: %d", code)
	}
	if code, body := get(t, base+"/admin/events?state=done", "e2e-token"); code != http.StatusOK || !strings.Contains(body, "evt_e2e_1") {
		t.Errorf("admin with token: %d %s", code, body)
	}
	if code, body := get(t, base+"/admin/queues/api/queues", "e2e-token"); code != http.StatusOK || !strings.Contains(body, cfg.Queue) {
		t.Errorf("dashboard API: %d %s", code, body)
	}

	// Every metric named in the issue is exposed.
	want := []string{
		`webhookd_received_total{outcome="accepted",source="stripe"}`,
		`webhookd_received_total{outcome="duplicate",source="stripe"}`,
		`webhookd_received_total{outcome="rejected_signature",source="stripe"}`,
		`webhookd_ack_latency_seconds_bucket{source="stripe"`,
		`webhookd_enqueue_failures_total`,
		`webhookd_relay_backlog`,
		`webhookd_job_outcomes_total{destination="sink",outcome="done",source="stripe"}`,
		`webhookd_destination_latency_seconds_bucket{destination="sink",source="stripe"`,
		`webhookd_destination_calls_total{class="2xx",destination="sink",source="stripe"}`,
		`webhookd_destination_holds_total{destination="sink",reason="circuit_open",source="stripe"}`,
		`webhookd_destination_state{destination="sink",source="stripe",state="active"} 1`,
		`webhookd_destination_in_flight{destination="sink",source="stripe"}`,
		`webhookd_recovery_tasks_total{action="written"}`,
		`webhookd_unknown_outcome_calls`,
		`webhookd_sweeper_resets_total{status="failed"}`,
		`webhookd_retention_last_success_timestamp_seconds`,
		`webhookd_duplicate_keys`,
		`webhookd_queue_size{queue="` + cfg.Queue + `",state="pending"}`,
		`webhookd_queue_size{queue="` + cfg.Queue + `",state="archived"}`,
	}
	var metrics string
	pipelinetest.Eventually(t, 20*time.Second, "every metric on /metrics", func() bool {
		_, metrics = get(t, base+"/metrics", "")
		for _, w := range want {
			if !strings.Contains(metrics, w) {
				return false
			}
		}
		return true
	})
	if strings.Contains(metrics, e2eSecret) {
		t.Error("/metrics holds the source secret")
	}

	// Log lines are JSON and carry the fields; no secret appears.
	out := logs.String()
	if strings.Contains(out, e2eSecret) || strings.Contains(out, "e2e-token") {
		t.Error("a log line holds a secret")
	}
	found := map[string]bool{}
	for _, l := range jsonLines(t, out) {
		msg, _ := l["msg"].(string)
		has := func(keys ...string) {
			for _, k := range keys {
				if _, ok := l[k]; !ok {
					t.Errorf("log line %q lacks %s: %v", msg, k, l)
				}
			}
		}
		switch {
		case msg == "event accepted":
			has("source", "event_id", "deliveries", "request_id")
		case msg == "duplicate delivery":
			has("source", "event_id", "deliveries", "request_id")
			if l["deliveries"] != 2.0 {
				t.Errorf("duplicate line deliveries = %v", l["deliveries"])
			}
		case msg == "delivered":
			has("source", "event_id", "key", "attempt")
		case strings.Contains(msg, "lease passed"):
			has("source", "event_id", "key", "attempts")
		case strings.HasPrefix(msg, "admin request refused"):
			has("request_id", "status_code")
		case strings.HasPrefix(msg, "admin API"):
		default:
			continue
		}
		found[msg] = true
	}
	for _, m := range []string{"event accepted", "duplicate delivery", "delivered", "admin request refused"} {
		if !found[m] {
			t.Errorf("no %q log line", m)
		}
	}
}

func TestProcessWithoutTokenSaysLoopbackOnly(t *testing.T) {
	t.Parallel()
	base, _, _, _, logs := startProcess(t, "")
	if code, _ := get(t, base+"/admin/events", ""); code != http.StatusOK {
		t.Errorf("admin from loopback without a token: %d", code)
	}
	var warned bool
	for _, l := range jsonLines(t, logs.String()) {
		if msg, _ := l["msg"].(string); strings.Contains(msg, "answer only on loopback") && l["level"] == "WARN" {
			warned = true
		}
	}
	if !warned {
		t.Error("start-up log does not say admin answers only on loopback")
	}
}

func TestListenNames(t *testing.T) {
	t.Parallel()
	for given, expect := range map[string][]string{
		":8080":                 nil,
		"127.0.0.1:8080":        nil,
		"[::1]:8080":            nil,
		"Admin.Internal:8080":   {"admin.internal"},
		"not an address at all": nil,
	} {
		if got := listenNames(given); !slices.Equal(got, expect) {
			t.Errorf("listenNames(%q) = %q, want %q", given, got, expect)
		}
	}
}

func TestComposeConfigIsValid(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../compose.webhookd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"DATABASE_URL": "postgres://postgres:pw@postgres:5432/webhookd", "REDIS_URL": "redis://redis:6379/0",
		"WEBHOOKD_ADMIN_TOKEN": "t", "STRIPE_WEBHOOK_SECRET": "whsec_x", "DEMO_DESTINATION_URL": "http://sink:9000/hooks/demo",
	}
	cfg, err := parseConfig("compose.webhookd.yaml", raw, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatalf("compose.webhookd.yaml: %v", err)
	}
	if cfg.AdminToken != "t" || cfg.Sources[0].Destinations[0].URL != "http://sink:9000/hooks/demo" {
		t.Errorf("environment not applied: %+v", cfg)
	}
}
