package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/testkit/pgtest"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/internal/testkit/proctest"
	"github.com/webhookd/webhookd/internal/testkit/redistest"
)

// TestRuleErrorsAtStartAndAtDelivery: a rule that does not compile stops
// the process at start with exit 1, naming file, line and column. A rule
// that fails at delivery on one event (a missing field) fails that run
// with the error while the others are delivered; fixing the file,
// reloading and replaying the failed event delivers it with the fixed
// rule, and its call keeps the transformed body it sent.
func TestRuleErrorsAtStartAndAtDelivery(t *testing.T) {
	t.Parallel()
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	rdb := redistest.New(t)

	var (
		mu     sync.Mutex
		bodies = map[string][]string{}
	)
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies[r.Header.Get("Webhookd-Event-Id")] = append(bodies[r.Header.Get("Webhookd-Event-Id")], string(b))
		mu.Unlock()
	}))
	t.Cleanup(dest.Close)
	rule := func(transform string) string {
		return reloadConfig(schema, rdb, fmt.Sprintf("{name: ledger, url: %q, timeout: 2s, transform: '%s'}", dest.URL, transform))
	}

	// Line 18 of the file is the destination's (reloadConfig's layout);
	// the column is the expression's.
	bad := proctest.WriteConfig(t, rule(`{"amount": body.amount +}`))
	out, err := exec.CommandContext(t.Context(), bin, "serve", "--config", bad).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("serve with a rule that does not compile: %v, want exit 1\n%s", err, out)
	}
	if want := bad + ":18: sources[0].destinations[0].transform: column 25: Syntax error"; !strings.Contains(string(out), want) {
		t.Errorf("serve with a rule that does not compile said\n%s\nwant it to contain %q", out, want)
	}

	path := proctest.WriteConfig(t, rule(`{"amount": body.data.amount, "id": event.id}`))
	p := proctest.StartWebhookd(t, "serve", bin, "serve", path)
	for _, body := range []string{
		`{"id":"evt_1","type":"t","data":{"amount":10}}`,
		`{"id":"evt_2","type":"t","data":{}}`,
		`{"id":"evt_3","type":"t","data":{"amount":30}}`,
	} {
		resp, err := sendClient.Post(p.URL()+"/webhooks/test", "application/json", strings.NewReader(body))
		if err != nil || resp.StatusCode != http.StatusAccepted {
			t.Fatalf("sending %s: %v %v", body, err, resp)
		}
		resp.Body.Close()
	}
	pipelinetest.Eventually(t, 20*time.Second, "three runs settled", func() bool {
		return schema.Int(t, `SELECT count(*) FROM job_runs WHERE status IN ('done', 'failed')`) == 3
	})
	if got := schema.Int(t, `SELECT count(*) FROM job_runs WHERE external_id = 'evt_2' AND status = 'failed' AND attempts = 1
	                          AND last_error LIKE 'rule error: %no such key: amount%'`); got != 1 {
		t.Errorf("evt_2's run is not failed once with the rule's error")
	}
	if !strings.Contains(p.Logs(), "rule error") {
		t.Errorf("the rule error was not logged as one:\n%s", p.Logs())
	}
	mu.Lock()
	if len(bodies) != 2 || len(bodies["evt_2"]) != 0 {
		t.Errorf("the destination got %v, want evt_1 and evt_3 only", bodies)
	}
	mu.Unlock()

	// Fixed: a missing amount is 0. Reloaded, then the failed event
	// replayed: sent with the fixed rule, under the same key.
	if err := os.WriteFile(path, []byte(rule(`{"amount": body.data.?amount.orValue(0), "id": event.id}`)), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, body := reloadPost(t, p); code != http.StatusOK {
		t.Fatalf("reload: %d %s", code, body)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, p.URL()+"/admin/events/test/evt_2/replay",
		strings.NewReader(`{"reason":"rule fixed"}`))
	req.Header.Set("Authorization", "Bearer "+reloadToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := sendClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("replay: %d %s", resp.StatusCode, b)
	}
	pipelinetest.Eventually(t, 20*time.Second, "evt_2 delivered after the fix", func() bool {
		return schema.Int(t, `SELECT count(*) FROM job_runs WHERE external_id = 'evt_2' AND status = 'done'`) == 1
	})
	mu.Lock()
	sent := bodies["evt_2"]
	mu.Unlock()
	var got, want any
	if len(sent) == 1 {
		_ = json.Unmarshal([]byte(sent[0]), &got)
	}
	_ = json.Unmarshal([]byte(`{"amount":0,"id":"evt_2"}`), &want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("evt_2 was sent %q, want one call with %v", sent, want)
	}
	// The call keeps what it sent: the transformed body, not the event's.
	if n := schema.Int(t, `SELECT count(*) FROM delivery_attempts WHERE key = 'test:ledger:evt_2' AND succeeded
	                        AND sent_body = convert_to($1, 'UTF8')`, sent[0]); n != 1 {
		t.Errorf("evt_2's call does not keep the body it sent")
	}
}
