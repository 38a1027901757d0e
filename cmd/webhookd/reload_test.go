package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/sink"
	"github.com/webhookd/webhookd/internal/testkit/pgtest"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/internal/testkit/proctest"
	"github.com/webhookd/webhookd/internal/testkit/redistest"
)

const reloadToken = "reload-admin-token-0123456789"

// reloadConfig is a serve process's file with the destinations dests
// (YAML list items) of its one source.
func reloadConfig(schema *pgtest.Schema, rdb *redistest.DB, dests ...string) string {
	return fmt.Sprintf(`database_url: %q
redis_url: %q
queue: %q
admin_token: %q
lease: 3s
worker:
  concurrency: 16
  retry_base: 100ms
  retry_max: 1s
  recovery_interval: 500ms
  recovery_min_age: 300ms
sources:
  - name: test
    verify: {scheme: none, allow_unsigned: true}
    event_id: json:id
    event_type: json:type
    destinations:
%s`, schema.URL, rdb.URL, rdb.Queue, reloadToken, "      - "+strings.Join(dests, "\n      - ")+"\n")
}

// TestReloadUnderLoad: while webhooks arrive without a pause, SIGHUP
// with an invalid file changes nothing, then one that removes a
// destination, adds one and changes another's filter puts them in force
// for the events after it. Every event is planned by the one or the other
// configuration, every destination of its plan still configured gets it
// exactly once, and a removed destination gets nothing twice.
// POST /admin/reload does the same through the API.
func TestReloadUnderLoad(t *testing.T) {
	t.Parallel()
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	rdb := redistest.New(t)
	sinks := map[string]*sink.Sink{}
	urls := map[string]string{}
	for _, n := range []string{"a", "b", "c"} {
		sinks[n] = sink.New(nil)
		s := httptest.NewServer(sinks[n])
		t.Cleanup(s.Close)
		urls[n] = s.URL
	}
	dest := func(name, url, extra string) string {
		return fmt.Sprintf("{name: %s, url: %q, timeout: 2s%s}", name, url, extra)
	}
	v1 := reloadConfig(schema, rdb, dest("a", urls["a"], `, filter: ["order.*"]`), dest("b", urls["b"], ""))
	v2 := reloadConfig(schema, rdb, dest("a", urls["a"], `, filter: ["invoice.*"]`), dest("c", urls["c"], ""))
	path := proctest.WriteConfig(t, v1)
	p := proctest.StartWebhookd(t, "serve", bin, "serve", path)

	// Webhooks without a pause, two types in turn, from 4 senders.
	var (
		mu     sync.Mutex
		sent   []string
		stop   = make(chan struct{})
		wg     sync.WaitGroup
		failed []string
		// reloaded is set once the reload is seen done: an event sent
		// after it must be planned by the new file.
		reloaded   atomic.Bool
		sentAfter  = map[string]bool{}
		doneBefore = map[string]bool{}
	)
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("evt_%d_%d", w, i)
				typ := []string{"order.created", "invoice.paid"}[i%2]
				after := reloaded.Load()
				resp, err := sendClient.Post(p.URL()+"/webhooks/test", "application/json",
					strings.NewReader(fmt.Sprintf(`{"id":%q,"type":%q}`, id, typ)))
				mu.Lock()
				if err != nil || resp.StatusCode != http.StatusAccepted {
					failed = append(failed, fmt.Sprintf("%s: %v %v", id, err, resp))
				} else {
					sent = append(sent, id)
					sentAfter[id] = after
				}
				mu.Unlock()
				if resp != nil {
					resp.Body.Close()
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(sent) }
	pipelinetest.Eventually(t, 20*time.Second, "40 events sent", func() bool { return count() >= 40 })

	// An invalid file: nothing changes, the problem is logged and counted.
	if err := os.WriteFile(path, []byte(v2+"    bogus_key: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p.Signal(syscall.SIGHUP)
	pipelinetest.Eventually(t, 10*time.Second, "the invalid file refused", func() bool {
		return strings.Contains(p.Logs(), "configuration not reloaded")
	})
	if !strings.Contains(p.Logs(), "bogus_key") {
		t.Errorf("the refused reload does not name the unknown key:\n%s", p.Logs())
	}
	code, body := reloadPost(t, p)
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "bogus_key") {
		t.Errorf("POST /admin/reload with an invalid file: %d %s, want 422 naming bogus_key", code, body)
	}
	before := count()
	pipelinetest.Eventually(t, 20*time.Second, "20 more events", func() bool { return count() >= before+20 })

	// The valid one: b removed, c added, a's filter changed.
	if err := os.WriteFile(path, []byte(v2), 0o600); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	for _, id := range sent {
		doneBefore[id] = true
	}
	mu.Unlock()
	p.Signal(syscall.SIGHUP)
	pipelinetest.Eventually(t, 10*time.Second, "the reload", func() bool { return strings.Contains(p.Logs(), `"msg":"configuration reloaded"`) })
	reloaded.Store(true)
	sentAfterReload := count()
	pipelinetest.Eventually(t, 20*time.Second, "40 more events", func() bool { return count() >= sentAfterReload+40 })
	close(stop)
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d webhooks not accepted across the reloads, e.g. %s", len(failed), failed[0])
	}

	// The same file again through the API: nothing to change.
	code, body = reloadPost(t, p)
	var res struct {
		Sources, Destinations   int
		Added, Removed, Changed []string
	}
	if err := json.Unmarshal([]byte(body), &res); code != http.StatusOK || err != nil || res.Destinations != 2 ||
		len(res.Added)+len(res.Removed)+len(res.Changed) != 0 {
		t.Errorf("POST /admin/reload of the file in force: %d %s, want 200 and nothing changed", code, body)
	}
	if !strings.Contains(p.Logs(), `"added":["test/c"]`) || !strings.Contains(p.Logs(), `"removed":["test/b"]`) ||
		!strings.Contains(p.Logs(), `"changed":["test/a"]`) {
		t.Errorf("the reload's log line does not say what changed:\n%s", p.Logs())
	}

	// Each event's plan is the first configuration's before the signal,
	// the second's once it was in force, either in between.
	v1Plan := map[string][]string{"order.created": {"a", "b"}, "invoice.paid": {"b"}}
	v2Plan := map[string][]string{"order.created": {"c"}, "invoice.paid": {"a", "c"}}
	plans := map[string][]string{}
	rows, err := schema.Pool.Query(t.Context(), `SELECT external_id, event_type, plan FROM events`)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for rows.Next() {
		var id, typ string
		var plan []string
		if err := rows.Scan(&id, &typ, &plan); err != nil {
			t.Fatal(err)
		}
		plans[id], types[id] = plan, typ
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(plans) != len(sent) {
		t.Fatalf("%d events recorded, %d accepted", len(plans), len(sent))
	}
	var old, current int
	for _, id := range sent {
		plan, typ := plans[id], types[id]
		switch {
		case doneBefore[id] && !slices.Equal(plan, v1Plan[typ]):
			t.Errorf("%s (%s) sent before the reload is planned %v, want %v", id, typ, plan, v1Plan[typ])
		case sentAfter[id] && !slices.Equal(plan, v2Plan[typ]):
			t.Errorf("%s (%s) sent after the reload is planned %v, want %v", id, typ, plan, v2Plan[typ])
		case !slices.Equal(plan, v1Plan[typ]) && !slices.Equal(plan, v2Plan[typ]):
			t.Errorf("%s (%s) is planned %v, neither configuration's plan", id, typ, plan)
		}
		if slices.Equal(plan, v1Plan[typ]) {
			old++
		} else {
			current++
		}
	}
	t.Logf("%d events planned before the reload, %d after", old, current)

	// Every planned destination still configured gets its events exactly
	// once; the removed one never twice.
	pipelinetest.Eventually(t, 60*time.Second, "every planned, configured run delivered", func() bool {
		for _, id := range sent {
			for _, d := range plans[id] {
				if d != "b" && sinks[d].Count("test:"+d+":"+id) == 0 {
					return false
				}
			}
		}
		return true
	})
	for _, id := range sent {
		for _, d := range []string{"a", "b", "c"} {
			n := sinks[d].Count("test:" + d + ":" + id)
			switch {
			case n > 1:
				t.Errorf("%s got %s %d times", d, id, n)
			case n == 1 && !slices.Contains(plans[id], d):
				t.Errorf("%s got %s, planned %v", d, id, plans[id])
			case n == 0 && d != "b" && slices.Contains(plans[id], d):
				t.Errorf("%s never got %s, planned %v", d, id, plans[id])
			}
		}
	}
	if n := schema.Int(t, `SELECT count(*) FROM delivery_attempts WHERE succeeded GROUP BY key ORDER BY 1 DESC LIMIT 1`); n > 1 {
		t.Errorf("a key was delivered %d times", n)
	}
}

// reloadPost asks p to reload through the admin API.
func reloadPost(t *testing.T, p *proctest.Process) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, p.URL()+"/admin/reload", nil)
	req.Header.Set("Authorization", "Bearer "+reloadToken)
	resp, err := sendClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}
