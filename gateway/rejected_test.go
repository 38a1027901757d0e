package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/gateway/admin"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
)

const rejectedToken = "rejected-admin-token-0123456789"

// TestRejectedRequestsAreKept: a forged signature, a missing event id and
// an unknown source are kept with their answer, reason, client and body,
// the signature masked and credentials left out; a flood of forged
// requests from many goroutines is bounded per source and minute (the
// rest counted) and delays no genuine event.
func TestRejectedRequestsAreKept(t *testing.T) {
	t.Parallel()
	p := pipelinetest.Start(t, pipelinetest.Options{Destinations: map[string]string{"app": "http://127.0.0.1:9/"},
		AdminTokens: []string{rejectedToken}, NoWorker: true})
	forged := http.Header{"Stripe-Signature": {"t=1,v1=deadbeef"}, "Authorization": {"Bearer hop-credential"}}
	if code, _ := p.Post(t, "/webhooks/"+pipelinetest.Source, forged, []byte(`{"id":"evt_forged","secret_field":"x"}`)); code != http.StatusUnauthorized {
		t.Fatalf("forged: %d, want 401", code)
	}
	if code, _ := p.Post(t, "/webhooks/nosuchsource", nil, []byte(`{}`)); code != http.StatusNotFound {
		t.Fatalf("unknown source: %d, want 404", code)
	}
	list := func(query string) admin.RejectedListJSON {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, p.URL+"/admin/rejected?"+query, nil)
		req.Header.Set("Authorization", "Bearer "+rejectedToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out admin.RejectedListJSON
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /admin/rejected?%s: %d %v", query, resp.StatusCode, err)
		}
		return out
	}
	var got admin.RejectedListJSON
	pipelinetest.Eventually(t, 10*time.Second, "both kept", func() bool { got = list(""); return len(got.Rejected) == 2 })
	unknown, bad := got.Rejected[0], got.Rejected[1]
	if unknown.Source != "nosuchsource" || unknown.Status != http.StatusNotFound {
		t.Errorf("the unknown source's record: %+v", unknown)
	}
	if bad.Source != pipelinetest.Source || bad.Status != http.StatusUnauthorized || !strings.Contains(bad.Reason, "Stripe-Signature") ||
		bad.Body != `{"id":"evt_forged","secret_field":"x"}` || bad.Remote == "" {
		t.Errorf("the forged request's record: %+v", bad)
	}
	if h := string(bad.Headers); strings.Contains(h, "deadbeef") || strings.Contains(h, "hop-credential") || !strings.Contains(h, "Stripe-Signature") {
		t.Errorf("kept headers %s, want the signature masked and the hop's credential left out", h)
	}

	// A flood: 300 forged requests from 10 goroutines, a genuine event
	// in the middle.
	var wg sync.WaitGroup
	for g := range 10 {
		wg.Go(func() {
			for i := range 30 {
				p.Post(t, "/webhooks/"+pipelinetest.Source, forged, fmt.Appendf(nil, `{"id":"evt_flood_%d_%d"}`, g, i))
			}
		})
	}
	if code, b := p.Send(t, []byte(`{"id":"evt_genuine","type":"x"}`)); code != http.StatusAccepted {
		t.Errorf("a genuine event during the flood: %d %s", code, b)
	}
	wg.Wait()
	time.Sleep(500 * time.Millisecond)
	kept := p.Schema.Int(t, `SELECT count(*) FROM rejected_requests WHERE source = $1`, pipelinetest.Source)
	// At most 60 a minute (twice that if the flood straddles a minute).
	if kept < 60 || kept > 120 {
		t.Errorf("%d of 301 forged requests kept, want the per-minute bound (60, at most 120 across a minute)", kept)
	}
	resp, err := http.Get(p.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	metrics, _ := io.ReadAll(resp.Body)
	if strings.Contains(string(metrics), `webhookd_rejected_not_kept_total{reason="rate"} 0`) ||
		!strings.Contains(string(metrics), `webhookd_rejected_not_kept_total{reason="rate"}`) {
		t.Errorf("the requests not kept are not counted")
	}
}
