package gateway_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/jobs"
)

// adminGet reads an admin API path with token and returns its body.
func adminGet(t *testing.T, p *pipelinetest.Pipeline, token, path string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, p.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return string(b)
}

// TestGraphClientStateNeverLeaves: a Graph notification's clientState,
// the subscription's only secret, is masked in the stored payload, so
// neither the admin API (a read-only token) nor a destination learns it
// (issue 23, L2); the rest of the body arrives byte for byte, and the
// event id is still the hash of the body as Graph sent it, so Graph's
// retry is a duplicate. Before, the payload kept it: whoever read one
// event could send accepted notifications.
func TestGraphClientStateNeverLeaves(t *testing.T) {
	t.Parallel()
	const secret = "graph-client-state-secret"
	var (
		mu   sync.Mutex
		got  []byte
		done = make(chan struct{})
	)
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		if got == nil {
			got = b
			close(done)
		}
		mu.Unlock()
	}))
	t.Cleanup(dest.Close)
	const reader = "read-only-token-0123456789"
	p := pipelinetest.Start(t, pipelinetest.Options{
		AdminReadOnlyTokens: []string{reader}, AdminTokens: []string{"full-token-0123456789abcdef"},
		Sources: []pipelinetest.SourceSpec{{
			Name: "graph", Verify: verify.Config{Scheme: verify.SchemeMSGraph, Secrets: []string{secret}},
			Destinations: map[string]string{"app": dest.URL},
		}},
	})
	body := []byte(`{"value":[{"subscriptionId":"sub-1","clientState":"` + secret + `","changeType":"created","resource":"Users/1"},` +
		`{"subscriptionId":"sub-1","clientState" : "` + secret + `","changeType":"updated","resource":"Users/2"}]}`)
	if code, answer := p.Post(t, "/webhooks/graph", nil, body); code != http.StatusAccepted {
		t.Fatalf("notification: %d %s", code, answer)
	}
	sum := sha256.Sum256(body)
	id := hex.EncodeToString(sum[:])
	if code, answer := p.Post(t, "/webhooks/graph", nil, body); code != http.StatusOK || !strings.Contains(string(answer), id) {
		t.Errorf("Graph's retry: %d %s, want a duplicate of %s", code, answer, id)
	}

	var stored string
	if err := p.Schema.Pool.QueryRow(context.Background(), `SELECT convert_from(payload, 'UTF8') FROM events WHERE external_id = $1`, id).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	masked := strings.ReplaceAll(string(body), `"`+secret+`"`, `"[masked: 25 bytes]"`)
	if stored != masked {
		t.Errorf("stored payload:\n%s\nwant\n%s", stored, masked)
	}
	if shown := adminGet(t, p, reader, "/admin/events/graph/"+id); strings.Contains(shown, secret) {
		t.Errorf("the admin API shows the clientState to a read-only token: %s", shown)
	}
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("the destination was not called")
	}
	mu.Lock()
	defer mu.Unlock()
	if string(got) != masked {
		t.Errorf("the destination got:\n%s\nwant\n%s", got, masked)
	}
}

// TestForwardedSignatureHeaderShownMasked: an hmac-sha256 source's own
// signature header, whose name does not say it is one, is stored as sent
// when a destination forwards it, and the admin API shows it masked
// (issue 23, L2). Before, MaskHeaders did not know the source's header
// and showed it in clear, although the docs said masked.
func TestForwardedSignatureHeaderShownMasked(t *testing.T) {
	t.Parallel()
	acme := verify.Config{Scheme: verify.SchemeHMACSHA256, Secrets: []string{"acme-secret"}, Header: "X-Acme-Check"}
	const reader = "read-only-token-0123456789"
	p := pipelinetest.Start(t, pipelinetest.Options{
		NoWorker: true, AdminReadOnlyTokens: []string{reader}, AdminTokens: []string{"full-token-0123456789abcdef"},
		Sources: []pipelinetest.SourceSpec{{
			Name: "acme", Verify: acme, EventID: "json:id",
			Destinations: map[string]string{"app": "http://127.0.0.1:9/app"},
			Tune:         func(d *jobs.DestinationSpec) { d.ForwardHeaders = []string{"X-Acme-Check"} },
		}},
	})
	body := []byte(`{"id":"evt_acme_1"}`)
	h, _, err := verify.Sign(acme, body, time.Now(), "")
	if err != nil {
		t.Fatal(err)
	}
	if code, answer := p.Post(t, "/webhooks/acme", h, body); code != http.StatusAccepted {
		t.Fatalf("%d %s", code, answer)
	}
	sig := h.Get("X-Acme-Check")
	var stored string
	if err := p.Schema.Pool.QueryRow(context.Background(), `SELECT headers::text FROM events WHERE external_id = 'evt_acme_1'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stored, sig) {
		t.Fatalf("the forwarded signature header is not stored as sent (a destination forwards it from there): %s", stored)
	}
	var d struct {
		Headers map[string][]string `json:"headers"`
	}
	if err := json.Unmarshal([]byte(adminGet(t, p, reader, "/admin/events/acme/evt_acme_1")), &d); err != nil {
		t.Fatal(err)
	}
	if v := d.Headers["X-Acme-Check"]; len(v) != 1 || !strings.HasPrefix(v[0], "[masked: ") {
		t.Errorf("X-Acme-Check shown as %q, want masked", v)
	}
}
