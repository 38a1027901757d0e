package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway/admin"
	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/jobs"
)

// bodyRecorder is a destination that keeps every call's headers and body.
type bodyRecorder struct {
	*httptest.Server
	mu    sync.Mutex
	calls []recordedCall
}

type recordedCall struct {
	header http.Header
	body   []byte
}

func newBodyRecorder(t *testing.T) *bodyRecorder {
	r := &bodyRecorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.calls = append(r.calls, recordedCall{req.Header.Clone(), body})
		r.mu.Unlock()
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *bodyRecorder) byEvent() map[string]recordedCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]recordedCall{}
	for _, c := range r.calls {
		out[c.header.Get("Webhookd-Event-Id")] = c
	}
	return out
}

const (
	rulesSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	rulesToken  = "rules-admin-token-0123456789"
)

// TestRulesRouteAndReshape: three destinations of one source, each with a
// rule: `when` on a nested number, `when` on a header, and a `transform`
// building a new object from nested fields and event.id. Each receives
// exactly the events its rule admits, the transformed body is what was
// signed (and says so), the key is the same as without rules; a rule that
// fails on the events (a missing field) fails their runs with the error,
// and rejected events are settled filtered, the event done.
func TestRulesRouteAndReshape(t *testing.T) {
	t.Parallel()
	rec := map[string]*bodyRecorder{}
	urls := map[string]string{}
	for _, n := range []string{"big", "eu", "ledger", "broken"} {
		rec[n] = newBodyRecorder(t)
		urls[n] = rec[n].URL
	}
	rules := map[string]jobs.DestinationSpec{
		"big":    {When: `body.data.object.amount_due > 0`},
		"eu":     {When: `event.headers[?"x-shop-region"].orValue("") == "eu"`},
		"ledger": {Transform: `{"customer": body.data.object.customer, "amount": body.data.object.amount_due, "id": event.id}`, SigningSecret: rulesSecret},
		"broken": {When: `body.data.object.missing > 0`},
	}
	p := pipelinetest.Start(t, pipelinetest.Options{MaxAttempts: 3, AdminTokens: []string{rulesToken}, Sources: []pipelinetest.SourceSpec{{
		Name:         "shop",
		Verify:       verify.Config{Scheme: "none", AllowUnsigned: true},
		EventID:      "json:id",
		EventType:    "json:type",
		Destinations: urls,
		Tune: func(d *jobs.DestinationSpec) {
			r := rules[d.Name]
			d.When, d.Transform, d.SigningSecret = r.When, r.Transform, r.SigningSecret
		},
	}}})

	const n = 1000
	for i := range n {
		h := http.Header{"Content-Type": {"application/json"}}
		if i%2 == 0 {
			h.Set("X-Shop-Region", "eu")
		}
		body := fmt.Sprintf(`{"id":"evt_%d","type":"invoice.created","data":{"object":{"customer":"cus_%d","amount_due":%d}}}`, i, i, i%3)
		if code, b := p.Post(t, "/webhooks/shop", h, []byte(body)); code != http.StatusAccepted {
			t.Fatalf("event %d: %d %s", i, code, b)
		}
	}
	pipelinetest.Eventually(t, 30*time.Second, "every run settled", func() bool {
		return p.Schema.Int(t, `SELECT count(*) FROM job_runs WHERE status IN ('done', 'filtered', 'failed')`) == 4*n
	})

	wantBig, wantEU := []string{}, []string{}
	for i := range n {
		if i%3 > 0 {
			wantBig = append(wantBig, fmt.Sprintf("evt_%d", i))
		}
		if i%2 == 0 {
			wantEU = append(wantEU, fmt.Sprintf("evt_%d", i))
		}
	}
	for name, want := range map[string][]string{"big": wantBig, "eu": wantEU} {
		got := rec[name].byEvent()
		ids := make([]string, 0, len(got))
		for id, c := range got {
			ids = append(ids, id)
			if c.header.Get("Webhookd-Transformed") != "" {
				t.Errorf("%s got %s marked transformed", name, id)
			}
		}
		slices.Sort(ids)
		slices.Sort(want)
		if !slices.Equal(ids, want) {
			t.Errorf("%s received %v, want %v", name, ids, want)
		}
		if filtered := p.Schema.Int(t, `SELECT count(*) FROM job_runs WHERE destination = $1 AND status = 'filtered'`, name); filtered != n-len(want) {
			t.Errorf("%s: %d runs filtered, want %d", name, filtered, n-len(want))
		}
	}

	signed, err := verify.New(verify.Config{Scheme: verify.SchemeStandard, Secrets: []string{rulesSecret}})
	if err != nil {
		t.Fatal(err)
	}
	ledger := rec["ledger"].byEvent()
	if len(ledger) != n {
		t.Fatalf("ledger got %d events, want %d", len(ledger), n)
	}
	for i := range n {
		id := fmt.Sprintf("evt_%d", i)
		c := ledger[id]
		var got, want any
		_ = json.Unmarshal(c.body, &got)
		_ = json.Unmarshal(fmt.Appendf(nil, `{"customer":"cus_%d","amount":%d,"id":%q}`, i, i%3, id), &want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("ledger got %s for %s, want %v", c.body, id, want)
		}
		if c.header.Get("Webhookd-Transformed") != "1" || c.header.Get("Content-Type") != "application/json" ||
			c.header.Get("Idempotency-Key") != "shop:ledger:"+id {
			t.Errorf("ledger's call for %s: headers %v", id, c.header)
		}
		if err := signed.Verify(verify.Request{Method: http.MethodPost, Header: c.header, Body: c.body}, time.Now()); err != nil {
			t.Errorf("ledger's call for %s: the signature is not over the transformed body: %v", id, err)
		}
	}

	// Each ledger call keeps the transformed body it sent; the event's
	// answer shows it.
	if got := p.Schema.Int(t, `SELECT count(*) FROM delivery_attempts WHERE key LIKE 'shop:ledger:%' AND succeeded
	                            AND convert_from(sent_body, 'UTF8')::jsonb ? 'customer'`); got != n {
		t.Errorf("%d ledger calls keep the body they sent, want %d", got, n)
	}
	if d, err := p.Store.GetEvent(t.Context(), "shop", "evt_7", dedupe.DestinationView{}); err != nil {
		t.Fatal(err)
	} else {
		kept := 0
		for _, a := range d.Attempts {
			if a.Key == "shop:ledger:evt_7" && string(a.SentBody) == string(ledger["evt_7"].body) {
				kept++
			}
		}
		if kept != 1 {
			t.Errorf("evt_7's ledger call does not show the body it sent: %+v", d.Attempts)
		}
	}

	// The rule that cannot be evaluated fails its runs with the error; no
	// call is made and the event shows failed, replayable.
	if len(rec["broken"].byEvent()) != 0 {
		t.Errorf("the broken rule's destination was called")
	}
	d, err := p.Store.GetEvent(t.Context(), "shop", "evt_1", dedupe.DestinationView{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range d.Runs {
		switch r.Destination {
		case "broken":
			if r.Status != dedupe.StatusFailed || !strings.Contains(r.LastError, "no such key: missing") ||
				p.Schema.Int(t, `SELECT count(*) FROM delivery_attempts WHERE key = $1`, r.Key) != 0 {
				t.Errorf("the broken rule's run: %+v, want failed with the rule's error and no call", r)
			}
		case "eu":
			if r.Status != dedupe.StatusFiltered {
				t.Errorf("evt_1's eu run is %s, want filtered", r.Status)
			}
		}
	}
	if d.State != dedupe.StatusFailed {
		t.Errorf("evt_1 is %s, want failed (its broken run)", d.State)
	}

	// Trying the rules on the stored events gives what delivery did: the
	// same matches, the same bodies, the same errors.
	for name, r := range rec {
		got := rulesTest(t, p, map[string]any{"source": "shop", "destination": name, "limit": 1000})
		delivered := r.byEvent()
		if len(got.Results) != n {
			t.Fatalf("rules test of %s: %d results, want %d", name, len(got.Results), n)
		}
		for _, res := range got.Results {
			c, sent := delivered[res.EventID]
			if res.Match != sent {
				t.Errorf("rules test of %s: %s match %v, delivery sent it %v", name, res.EventID, res.Match, sent)
			}
			if name == "ledger" && sent && string(res.Body) != string(c.body) {
				t.Errorf("rules test of ledger: %s body %s, sent %s", res.EventID, res.Body, c.body)
			}
			if (name == "broken") != (res.Error != "") {
				t.Errorf("rules test of %s: %s error %q", name, res.EventID, res.Error)
			}
		}
	}
	// A rule given instead of the configured one; one that does not
	// compile is refused saying where.
	if got := rulesTest(t, p, map[string]any{"source": "shop", "destination": "broken", "when": "body.data.object.amount_due == 2", "limit": 1000}); got.Matched != n/3 {
		t.Errorf("rules test with a given when: %d matched, want %d", got.Matched, n/3)
	}
	code, body := adminPost(t, p, "/admin/rules/test", `{"source":"shop","destination":"big","when":"body.x >"}`)
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "when: column") {
		t.Errorf("rules test with a rule that does not compile: %d %s, want 422 naming the column", code, body)
	}
}

// rulesTest calls POST /admin/rules/test.
func rulesTest(t *testing.T, p *pipelinetest.Pipeline, req map[string]any) admin.RulesTestJSON {
	t.Helper()
	b, _ := json.Marshal(req)
	code, body := adminPost(t, p, "/admin/rules/test", string(b))
	var out admin.RulesTestJSON
	if err := json.Unmarshal([]byte(body), &out); code != http.StatusOK || err != nil {
		t.Fatalf("POST /admin/rules/test %s: %d %s", b, code, body)
	}
	return out
}

// adminPost posts a JSON body to an admin path with the rules test's
// token.
func adminPost(t *testing.T, p *pipelinetest.Pipeline, path, body string) (int, string) {
	t.Helper()
	code, b := p.Post(t, path, http.Header{"Authorization": {"Bearer " + rulesToken}}, []byte(body))
	return code, string(b)
}
