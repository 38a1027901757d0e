package jobs_test

import (
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/jobs"
)

// fuzzRules are rules of the shapes operators write: nested fields,
// headers, comprehensions over lists, and a transform building an object.
var fuzzRules = []struct{ when, transform string }{
	{`body.data.object.amount_due > 0`, ``},
	{`event.headers[?"x-shop-region"].orValue("") == "eu"`, `{"id": event.id, "region": event.headers[?"x-shop-region"].orValue("none")}`},
	{`has(body.items) && body.items.exists(i, i.price > 100)`, `{"total": body.items.map(i, i.price).size()}`},
	{`event.type.startsWith("invoice.") || body.kind == "x"`, `body`},
	{``, `{"copy": [body, body, body], "type": event.type}`},
}

// FuzzRules: any JSON body against a fixed set of rules gives an answer
// or an ErrRule, never a panic, and no evaluation runs past the cost
// limit (the limit ends it with an error).
func FuzzRules(f *testing.F) {
	compiled := make([]*jobs.Rules, len(fuzzRules))
	for i, r := range fuzzRules {
		c, err := jobs.CompileRules(r.when, r.transform)
		if err != nil {
			f.Fatalf("rule %d: %v", i, err)
		}
		compiled[i] = c
	}
	for _, seed := range []string{
		`{"data":{"object":{"amount_due":5}}}`, `{"items":[{"price":200},{"price":1}]}`, `[]`, `null`, `"x"`, `not json`,
		`{"items":` + strings.Repeat(`[`, 50) + strings.Repeat(`]`, 50) + `}`, `{"kind":"x","items":[]}`,
	} {
		f.Add([]byte(seed), "eu")
	}
	f.Fuzz(func(t *testing.T, body []byte, region string) {
		headers, _ := json.Marshal(map[string][]string{"X-Shop-Region": {region}})
		ev := jobs.RuleEvent{Source: "shop", ID: "evt_1", Type: "invoice.created", ReceivedAt: time.Unix(1e9, 0), Headers: headers, Payload: body}
		for i, r := range compiled {
			res, err := r.Apply(ev)
			if err != nil && !errors.Is(err, jobs.ErrRule) {
				t.Fatalf("rule %d: an error that is not ErrRule: %v", i, err)
			}
			if err == nil && res.Body != nil && !json.Valid(res.Body) {
				t.Fatalf("rule %d: the transformed body is not JSON: %s", i, res.Body)
			}
		}
	})
}

// TestRuleCostLimit: a rule whose work grows with the payload stops at
// the cost limit with an error instead of holding a worker.
func TestRuleCostLimit(t *testing.T) {
	t.Parallel()
	r, err := jobs.CompileRules(`body.items.all(a, body.items.all(b, body.items.all(c, a + b + c >= 0)))`, "")
	if err != nil {
		t.Fatal(err)
	}
	items, _ := json.Marshal(map[string]any{"items": make([]int, 500)})
	start := time.Now()
	_, err = r.Apply(jobs.RuleEvent{Payload: items})
	if !errors.Is(err, jobs.ErrRule) || !strings.Contains(err.Error(), "cost") {
		t.Fatalf("a rule of 500³ steps: %v, want the cost limit's ErrRule", err)
	}
	t.Logf("stopped after %s", time.Since(start))
}

// BenchmarkRules is the per-delivery cost of a typical when and transform
// on a 1 KiB Stripe-like event (docs/performance.md).
func BenchmarkRules(b *testing.B) {
	r, err := jobs.CompileRules(`event.type.startsWith("invoice.") && body.data.object.amount_due > 0`,
		`{"customer": body.data.object.customer, "amount": body.data.object.amount_due, "id": event.id}`)
	if err != nil {
		b.Fatal(err)
	}
	payload := []byte(`{"id":"evt_1","type":"invoice.created","data":{"object":{"customer":"cus_123","amount_due":1200,"lines":"` +
		strings.Repeat("x", 900) + `"}}}`)
	ev := jobs.RuleEvent{Source: "stripe", ID: "evt_1", Type: "invoice.created", ReceivedAt: time.Now(),
		Headers: []byte(`{"Stripe-Signature":["t=1,v1=abc"]}`), Payload: payload}
	b.ReportAllocs()
	for b.Loop() {
		if res, err := r.Apply(ev); err != nil || !res.Match {
			b.Fatal(res, err)
		}
	}
}

// TestRulesOfTheDocsCompile: every when and transform in
// docs/destinations.md compiles.
func TestRulesOfTheDocsCompile(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/destinations.md")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, m := range regexp.MustCompile(`(?m)^\s+(when|transform): '(.*)'$`).FindAllStringSubmatch(string(doc), -1) {
		found++
		when, transform := m[2], ""
		if m[1] == "transform" {
			when, transform = "", m[2]
		}
		if _, err := jobs.CompileRules(when, transform); err != nil {
			t.Errorf("docs/destinations.md: %s: %v", m[0], err)
		}
	}
	if found < 5 {
		t.Errorf("found %d rules in docs/destinations.md, want the five examples' rules", found)
	}
}
