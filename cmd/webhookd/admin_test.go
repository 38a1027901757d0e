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
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd"
	"github.com/webhookd/webhookd/config"
	"github.com/webhookd/webhookd/gateway/admin"
	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/sink"
	"github.com/webhookd/webhookd/internal/testkit/logtest"
	"github.com/webhookd/webhookd/internal/testkit/pgtest"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/internal/testkit/redistest"
)

const e2eSecret = "whsec_e2e_admin_test_secret"

// e2eToken is the admin token of TestProcessMetricsAndLogs.
const e2eToken = "e2e-admin-token-0123456789"

// startProcess starts a gateway and worker process from a config whose
// admin part is adminYAML (top-level keys: admin_token, admin).
func startProcess(t *testing.T, adminYAML string) (string, *config.Config, *pgtest.Schema, *sink.Sink, *logtest.Buffer) {
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
%s
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
`, schema.URL, rdb.URL, rdb.Queue, adminYAML, e2eSecret, ds.URL)
	cfg, err := config.Parse("test.yaml", []byte(raw), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	logs := &logtest.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	pcfg := cfg.Process
	pcfg.Roles = webhookd.Roles{Gateway: true, Worker: true}
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

func sendSigned(t *testing.T, base string, cfg *config.Config, id string, secretOK bool) int {
	t.Helper()
	body := []byte(`{"id":"` + id + `","type":"invoice.paid"}`)
	vc := cfg.File.Sources[0].Verify
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
	base, cfg, schema, dest, logs := startProcess(t, "admin_token: "+e2eToken)

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
	if code, body := get(t, base+"/admin/events?state=done", e2eToken); code != http.StatusOK || !strings.Contains(body, "evt_e2e_1") {
		t.Errorf("admin with token: %d %s", code, body)
	}
	if code, body := get(t, base+"/admin/queues/api/queues", e2eToken); code != http.StatusOK || !strings.Contains(body, cfg.Process.Queue) {
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
		`webhookd_queue_size{queue="` + cfg.Process.Queue + `",state="pending"}`,
		`webhookd_queue_size{queue="` + cfg.Process.Queue + `",state="archived"}`,
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
	if strings.Contains(out, e2eSecret) || strings.Contains(out, e2eToken) {
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
		case msg == "admin needs a token":
			has("admin_mode", "full_tokens", "read_only_tokens")
		default:
			continue
		}
		found[msg] = true
	}
	for _, m := range []string{"event accepted", "duplicate delivery", "delivered", "admin request refused", "admin needs a token"} {
		if !found[m] {
			t.Errorf("no %q log line", m)
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
		"WEBHOOKD_ADMIN_TOKEN": e2eToken, "STRIPE_WEBHOOK_SECRET": "whsec_x", "DEMO_DESTINATION_URL": "http://sink:9000/hooks/demo",
	}
	cfg, err := config.Parse("compose.webhookd.yaml", raw, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatalf("compose.webhookd.yaml: %v", err)
	}
	if cfg.File.AdminToken != e2eToken || cfg.File.Sources[0].Destinations[0].URL != "http://sink:9000/hooks/demo" {
		t.Errorf("environment not applied: %+v", cfg)
	}
}

// TestProcessAdminBehindALocalProxy: a real process behind a real
// reverse proxy on the same host, whose requests all come from loopback.
// With no token admin is off, whichever way the proxy sets Host. With the
// unsafe opt-in, the Host check is all that stands: a proxy that forwards
// the client's Host (nginx's proxy_set_header Host $host) is refused for a
// public name, but one that sets Host to its upstream (nginx's default)
// hands admin, payloads included, to whoever reaches the proxy; that is
// why the key says unsafe. With tokens, the proxy changes nothing. The
// start-up log names the mode once.
func TestProcessAdminBehindALocalProxy(t *testing.T) {
	t.Parallel()
	const (
		fullTok = "proxy-full-token-0123456789"
		roTok   = "proxy-read-token-0123456789"
	)
	type via struct {
		name  string
		proxy string // "" direct, "forward" (Host kept), "rewrite" (Host set to the upstream)
		host  string // the Host the client sends ("" for the address it dials)
	}
	var (
		direct           = via{"direct", "", ""}
		forwardPublic    = via{"proxy keeping Host, public name", "forward", "admin.example.com"}
		forwardLocalhost = via{"proxy keeping Host, localhost (a tunnel)", "forward", "localhost"}
		rewritePublic    = via{"proxy setting Host to its upstream", "rewrite", "admin.example.com"}
	)
	for _, tc := range []struct {
		name      string
		adminYAML string
		expectLog string // a substring of the one line that names the mode
		mode      string
		level     string
		expect    map[via]int // without a token
		withToken map[string]int
	}{
		{
			name: "no token: off", adminYAML: "", mode: "off", level: "INFO", expectLog: "admin is off",
			expect:    map[via]int{direct: 403, forwardPublic: 403, forwardLocalhost: 403, rewritePublic: 403},
			withToken: map[string]int{fullTok: 403},
		},
		{
			name: "unsafe tokenless loopback", adminYAML: "admin: {unsafe_tokenless_loopback: true}",
			mode: "unsafe_tokenless_loopback", level: "WARN", expectLog: "UNSAFE",
			expect: map[via]int{direct: 200, forwardPublic: 403, forwardLocalhost: 200, rewritePublic: 200},
		},
		{
			name:      "tokens",
			adminYAML: "admin_token: " + fullTok + "\nadmin: {read_only_tokens: [" + roTok + "]}",
			mode:      "token", level: "INFO", expectLog: "admin needs a token",
			expect:    map[via]int{direct: 401, forwardPublic: 401, forwardLocalhost: 401, rewritePublic: 401},
			withToken: map[string]int{fullTok: 200, roTok: 200},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base, cfg, _, _, logs := startProcess(t, tc.adminYAML)
			if code := sendSigned(t, base, cfg, "evt_behind_proxy", true); code != http.StatusAccepted {
				t.Fatalf("send: %d", code)
			}
			target, _ := url.Parse(base)
			proxies := map[string]string{}
			for name, keepHost := range map[string]bool{"forward": true, "rewrite": false} {
				rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
					r.SetURL(target)
					if keepHost {
						r.Out.Host = r.In.Host
					}
				}}
				srv := httptest.NewServer(rp)
				t.Cleanup(srv.Close)
				proxies[name] = srv.URL
			}
			call := func(v via, token string) (int, string) {
				t.Helper()
				u := base
				if v.proxy != "" {
					u = proxies[v.proxy]
				}
				req, _ := http.NewRequest("GET", u+"/admin/events", nil)
				if v.host != "" {
					req.Host = v.host
				}
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(body)
			}
			for v, want := range tc.expect {
				code, body := call(v, "")
				if code != want {
					t.Errorf("%s, no token: %d %.200s, want %d", v.name, code, body, want)
				}
				if leaked := strings.Contains(body, "evt_behind_proxy"); leaked != (code == http.StatusOK) {
					t.Errorf("%s, no token: %d, payload listed: %v", v.name, code, leaked)
				}
			}
			for tok, want := range tc.withToken {
				for _, v := range []via{direct, forwardPublic, rewritePublic} {
					if code, body := call(v, tok); code != want {
						t.Errorf("%s with a token: %d %.200s, want %d", v.name, code, body, want)
					}
				}
			}

			var lines []map[string]any
			for _, l := range jsonLines(t, logs.String()) {
				if _, ok := l["admin_mode"]; ok && !strings.Contains(l["msg"].(string), "refused") {
					lines = append(lines, l)
				}
			}
			if len(lines) != 1 {
				t.Fatalf("%d start-up lines name the admin mode, want 1: %v", len(lines), lines)
			}
			l := lines[0]
			if l["admin_mode"] != tc.mode || l["level"] != tc.level || !strings.Contains(l["msg"].(string), tc.expectLog) {
				t.Errorf("start-up line %v, want %s %q with admin_mode %s", l, tc.level, tc.expectLog, tc.mode)
			}
			if tc.mode == "token" && (l["full_tokens"] != 1.0 || l["read_only_tokens"] != 1.0) {
				t.Errorf("start-up line %v, want 1 full and 1 read-only token", l)
			}
			if strings.Contains(logs.String(), fullTok) || strings.Contains(logs.String(), roTok) {
				t.Error("a log line holds an admin token")
			}
		})
	}
}

// TestDemoMakesAnAdminToken: the demo, given no admin token, makes a
// valid one for its run and prints it on the writer it is given (stderr:
// stdout is the JSON log) as a line to paste.
func TestDemoMakesAnAdminToken(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../webhookd.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("webhookd.example.yaml", raw, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.File.HasAdminTokens() {
		t.Fatal("the example config has an admin token without WEBHOOKD_ADMIN_TOKEN")
	}
	var out bytes.Buffer
	if err := demoAdminToken(cfg, &out); err != nil {
		t.Fatal(err)
	}
	tokens := cfg.Process.Admin.Tokens
	if len(tokens) != 1 || admin.CheckToken(tokens[0]) != nil || len(tokens[0]) < 32 {
		t.Fatalf("demo tokens %d, want one usable token of at least 32 bytes", len(tokens))
	}
	if !strings.Contains(out.String(), "export T="+tokens[0]+"\n") || !strings.Contains(out.String(), "http://localhost:8080/admin/") {
		t.Errorf("demo output does not give the token and where to use it:\n%s", out.String())
	}
	other := *cfg
	if err := demoAdminToken(&other, io.Discard); err != nil || other.Process.Admin.Tokens[0] == tokens[0] {
		t.Error("two demo runs made the same token")
	}
}
