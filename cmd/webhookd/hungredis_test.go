package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/testkit/pgtest"
	"github.com/webhookd/webhookd/internal/testkit/proctest"
)

// TestHungRedisBoundsAdminReads: with Redis hung (SIGSTOP: it keeps the
// connections and answers nothing), GET /admin/destinations and its page
// answer within seconds, every destination's state "unknown", and
// /readyz answers within its 2s (issue 23, L5): 200 and degraded, since a
// gateway goes on recording webhooks with Redis away (issue 25). Before, each
// destination's state was one Redis call in sequence without a deadline
// (go-redis ignored the context's without ContextTimeoutEnabled): eight
// destinations held the page for the whole stall, and /readyz took 5s.
func TestHungRedisBoundsAdminReads(t *testing.T) {
	t.Parallel()
	const token = "admin-token-0123456789abcdef"
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	rdb := proctest.StartRedis(t)
	var sources strings.Builder
	for _, src := range []string{"a", "b"} {
		fmt.Fprintf(&sources, "\n  - name: %s\n    verify: {scheme: none, allow_unsigned: true}\n    event_id: json:id\n    destinations:", src)
		for i := range 4 {
			fmt.Fprintf(&sources, "\n      - {name: d%d, url: \"http://127.0.0.1:9/%d\", circuit: {failures: 5}}", i, i)
		}
	}
	config := proctest.WriteConfig(t, fmt.Sprintf("database_url: %q\nredis_url: %q\nadmin_token: %q\nsources:%s\n",
		schema.URL, rdb.URL, token, sources.String()))
	p := proctest.StartWebhookd(t, "gateway", bin, "gateway", config)

	client := &http.Client{Timeout: 10 * time.Second}
	get := func(path, accept string) (int, string, time.Duration) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, p.URL()+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), time.Since(start)
	}
	if code, body, _ := get("/admin/destinations", ""); code != http.StatusOK || strings.Contains(body, `"unknown"`) {
		t.Fatalf("before the stall: %d %s", code, body)
	}

	rdb.Freeze()
	const within = 4 * time.Second
	code, body, took := get("/admin/destinations", "")
	t.Logf("GET /admin/destinations with Redis hung: %d in %s", code, took)
	var list struct {
		Destinations []struct{ State string } `json:"destinations"`
	}
	if err := json.Unmarshal([]byte(body), &list); code != http.StatusOK || err != nil || len(list.Destinations) != 8 {
		t.Fatalf("GET /admin/destinations with Redis hung: %d %s", code, body)
	}
	for _, d := range list.Destinations {
		if d.State != "unknown" {
			t.Errorf("a destination's state with Redis hung is %q, want unknown", d.State)
		}
	}
	if took > within {
		t.Errorf("GET /admin/destinations took %s with Redis hung, want under %s", took, within)
	}
	code, body, took = get("/admin/view/destinations", "text/html")
	t.Logf("the destinations page with Redis hung: %d in %s", code, took)
	if code != http.StatusOK || !strings.Contains(body, "Redis did not answer") || took > within {
		t.Errorf("the destinations page with Redis hung: %d in %s, want 200 saying Redis did not answer within %s", code, took, within)
	}
	code, body, took = get("/readyz", "")
	t.Logf("/readyz with Redis hung: %d %s in %s", code, strings.TrimSpace(body), took)
	if code != http.StatusOK || !strings.Contains(body, `"redis":"unreachable"`) || !strings.Contains(body, `"degraded":true`) || took > 2500*time.Millisecond {
		t.Errorf("/readyz with Redis hung: %d %s in %s, want 200 degraded with redis unreachable within its 2s", code, body, took)
	}
}
