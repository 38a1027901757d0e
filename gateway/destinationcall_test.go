package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway"
	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/jobs"
)

// recorder is a destination that keeps every call's headers by key.
type recorder struct {
	*httptest.Server
	mu    sync.Mutex
	calls map[string][]http.Header
}

func newRecorder(t *testing.T) *recorder {
	r := &recorder{calls: map[string][]http.Header{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.calls[req.Header.Get("Idempotency-Key")] = append(r.calls[req.Header.Get("Idempotency-Key")], req.Header.Clone())
		r.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.Close)
	return r
}

// first waits for key's first call and returns its headers.
func (r *recorder) first(t *testing.T, key string) http.Header {
	t.Helper()
	var h http.Header
	pipelinetest.Eventually(t, 15*time.Second, "a call with key "+key, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		if c := r.calls[key]; len(c) > 0 {
			h = c[0]
			return true
		}
		return false
	})
	return h
}

// count returns how many calls key got.
func (r *recorder) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls[key])
}

// TestEventType: the type is read at ingest (the scheme's default or the
// source's event_type), stored in events.event_type, and sent as
// Webhookd-Event-Type; an event without one is stored with NULL and sent
// without the header; a type that cannot be stored as text is refused
// with a 400 and records nothing.
func TestEventType(t *testing.T) {
	t.Parallel()
	dest := newRecorder(t)
	p := pipelinetest.Start(t, pipelinetest.Options{Destinations: map[string]string{"billing": dest.URL}})
	storedType := func(id string) *string {
		var typ *string
		if err := p.Schema.Pool.QueryRow(context.Background(),
			`SELECT event_type FROM events WHERE source = 'stripe' AND external_id = $1`, id).Scan(&typ); err != nil {
			t.Fatalf("event %s: %v", id, err)
		}
		return typ
	}

	code, answer := p.Send(t, eventBody("evt_typed"))
	if code != http.StatusAccepted {
		t.Fatalf("typed event: %d %s", code, answer)
	}
	if typ := storedType("evt_typed"); typ == nil || *typ != "charge.succeeded" {
		t.Errorf("stored type = %v, want charge.succeeded", typ)
	}
	if got := dest.first(t, "stripe:billing:evt_typed").Get("Webhookd-Event-Type"); got != "charge.succeeded" {
		t.Errorf("Webhookd-Event-Type = %q, want charge.succeeded", got)
	}

	code, answer = p.Send(t, []byte(`{"id":"evt_untyped","data":{}}`))
	if code != http.StatusAccepted {
		t.Fatalf("untyped event: %d %s", code, answer)
	}
	if typ := storedType("evt_untyped"); typ != nil {
		t.Errorf("stored type = %q, want NULL", *typ)
	}
	if h := dest.first(t, "stripe:billing:evt_untyped"); h.Values("Webhookd-Event-Type") != nil {
		t.Errorf("untyped event sent with Webhookd-Event-Type %q", h.Get("Webhookd-Event-Type"))
	}

	for name, typ := range map[string]string{"control character": `bad\u0001type`, "too long": fmt.Sprintf("%0300d", 1)} {
		id := "evt_bad_type_" + name[:3]
		code, answer = p.Send(t, fmt.Appendf(nil, `{"id":%q,"type":"%s"}`, id, typ))
		if code != http.StatusBadRequest {
			t.Errorf("%s: got %d %s, want 400", name, code, answer)
		}
		if n := p.Schema.Int(t, `SELECT count(*) FROM events WHERE external_id = $1`, id); n != 0 {
			t.Errorf("%s: %d events recorded, want 0", name, n)
		}
	}
}

// TestFilter: a destination whose filter the event's type matches none of
// makes no run (neither the relay nor the reconciler writes its task, and
// the reconciler still settles the event), and does not hold the event's
// state open: the repeat's answer, the detail and the list say done. An
// event without a type goes only to destinations without a filter; an
// event no destination wants is done once handed off.
func TestFilter(t *testing.T) {
	t.Parallel()
	dest := newRecorder(t)
	filters := map[string][]string{"charges": {"charge.*"}, "payouts": {"payout.paid", "payout.fail*"}}
	tune := func(d *jobs.DestinationSpec) {
		if f, ok := filters[d.Name]; ok {
			d.Filter = f
		}
	}
	stripe := verify.Config{Scheme: verify.SchemeStripe, Secrets: []string{pipelinetest.Secret}}
	const token = "filter-test-admin-token-0123"
	p := pipelinetest.Start(t, pipelinetest.Options{AdminTokens: []string{token}, Sources: []pipelinetest.SourceSpec{
		{Name: "stripe", Verify: stripe, Tune: tune, Destinations: map[string]string{"all": dest.URL, "charges": dest.URL, "payouts": dest.URL}},
		{Name: "picky", Verify: stripe, Tune: tune, Destinations: map[string]string{"payouts": dest.URL}},
	}})
	// adminState is the event's state as the admin API shows operators.
	adminState := func(source, id string) string {
		req, err := http.NewRequest(http.MethodGet, p.URL+"/admin/events/"+source+"/"+id, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var d struct {
			State string `json:"state"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&d); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("admin detail of %s/%s: %d %v", source, id, resp.StatusCode, err)
		}
		return d.State
	}
	send := func(source, id, typ string) (int, []byte) {
		body := fmt.Appendf(nil, `{"id":%q,"type":%q}`, id, typ)
		if typ == "" {
			body = fmt.Appendf(nil, `{"id":%q}`, id)
		}
		h, _, err := verify.Sign(stripe, body, time.Now(), "")
		if err != nil {
			t.Fatal(err)
		}
		return p.Post(t, "/webhooks/"+source, h, body)
	}
	cases := []struct {
		source, id, typ string
		expectRuns      []string
	}{
		{"stripe", "evt_charge", "charge.refunded", []string{"all", "charges"}},
		{"stripe", "evt_payout", "payout.failed", []string{"all", "payouts"}},
		{"stripe", "evt_other", "invoice.paid", []string{"all"}},
		{"stripe", "evt_untyped", "", []string{"all"}},
		{"picky", "evt_unwanted", "invoice.paid", nil},
	}
	for _, c := range cases {
		if code, answer := send(c.source, c.id, c.typ); code != http.StatusAccepted {
			t.Fatalf("%s: %d %s", c.id, code, answer)
		}
	}
	ctx := context.Background()
	for _, c := range cases {
		for _, d := range c.expectRuns {
			dest.first(t, c.source+":"+d+":"+c.id)
		}
	}
	// Past the reconciler's minimum age and a few of its passes: it has
	// looked at every event by now.
	pipelinetest.Eventually(t, 10*time.Second, "an empty outbox", func() bool {
		return p.Schema.Int(t, `SELECT count(*) FROM event_outbox`) == 0
	})
	time.Sleep(time.Second)
	routes := p.Routes
	for _, c := range cases {
		var runs []string
		if err := p.Schema.Pool.QueryRow(ctx, `SELECT COALESCE(array_agg(destination ORDER BY destination), '{}') FROM job_runs WHERE source = $1 AND external_id = $2`,
			c.source, c.id).Scan(&runs); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(runs) != fmt.Sprint(c.expectRuns) && !(len(runs) == 0 && len(c.expectRuns) == 0) {
			t.Errorf("%s (%q): runs for %v, want %v", c.id, c.typ, runs, c.expectRuns)
		}
		for name := range routes[c.source] {
			if want := slices.Contains(c.expectRuns, name); !want && dest.count(c.source+":"+name+":"+c.id) > 0 {
				t.Errorf("%s (%q): destination %s was called", c.id, c.typ, name)
			}
		}
		_, answer := send(c.source, c.id, c.typ)
		if !strings.Contains(string(answer), `"state":"done"`) {
			t.Errorf("%s: repeat answered %s, want state done", c.id, answer)
		}
		d, err := p.Store.GetEvent(ctx, c.source, c.id, dedupe.DestinationView{})
		if err != nil {
			t.Fatal(err)
		}
		if d.State != "done" {
			t.Errorf("%s: detail state %s, want done", c.id, d.State)
		}
		if st := adminState(c.source, c.id); st != "done" {
			t.Errorf("%s: the admin API says %s, want done", c.id, st)
		}
	}
	page, err := p.Store.ListEvents(ctx, dedupe.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range page.Events {
		if e.State != "done" {
			t.Errorf("list: %s/%s is %s, want done", e.Source, e.ExternalID, e.State)
		}
	}
}

// TestForwardedHeaders: per scheme, a destination gets the sender's
// headers that say what the event is, never the signature or the hop's
// credentials, unless forward_headers names them (then as they came,
// while the admin detail still shows them masked). Through a real
// worker calling a real HTTP destination.
func TestForwardedHeaders(t *testing.T) {
	t.Parallel()
	dest := newRecorder(t)
	named := []string{"X-Request-Id", "Authorization", "x-hub-signature-256"}
	tune := func(d *jobs.DestinationSpec) {
		if d.Name == "named" {
			d.ForwardHeaders = named
		}
	}
	gh := verify.Config{Scheme: verify.SchemeGitHub, Secrets: []string{"gh-secret"}}
	shop := verify.Config{Scheme: verify.SchemeShopify, Secrets: []string{"shpss_secret"}}
	p := pipelinetest.Start(t, pipelinetest.Options{Sources: []pipelinetest.SourceSpec{
		{Name: "github", Verify: gh, Tune: tune, Destinations: map[string]string{"plain": dest.URL, "named": dest.URL}},
		{Name: "shopify", Verify: shop, Destinations: map[string]string{"plain": dest.URL}},
	}})
	hop := map[string]string{
		"Authorization": "Bearer hop-credential", "Cookie": "session=hop-cookie",
		"X-Request-Id": "req-1", "X-Other": "not forwarded",
	}
	cases := []struct {
		source   string
		cfg      verify.Config
		id       string
		sender   map[string]string
		expectID string
		// expectType is the event type, from the scheme's default.
		expectType string
		signature  string
	}{
		{
			source: "github", cfg: gh, id: "d0e1-delivery",
			sender: map[string]string{
				"X-GitHub-Event": "pull_request", "X-GitHub-Hook-ID": "4242",
				"X-GitHub-Hook-Installation-Target-ID": "77", "X-GitHub-Hook-Installation-Target-Type": "repository",
			},
			expectID: "d0e1-delivery", expectType: "pull_request", signature: "X-Hub-Signature-256",
		},
		{
			source: "shopify", cfg: shop, id: "evt-shop-1",
			sender: map[string]string{
				"X-Shopify-Topic": "orders/create", "X-Shopify-Shop-Domain": "x.myshopify.com", "X-Shopify-API-Version": "2025-01",
				"X-Shopify-Triggered-At": "2026-12-03T10:00:00Z",
			},
			expectID: "evt-shop-1", expectType: "orders/create", signature: "X-Shopify-Hmac-Sha256",
		},
	}
	for _, c := range cases {
		body := []byte(`{"action":"opened","id":1}`)
		h, _, err := verify.Sign(c.cfg, body, time.Now(), c.id)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range c.sender {
			h.Set(k, v)
		}
		for k, v := range hop {
			h.Set(k, v)
		}
		if code, answer := p.Post(t, "/webhooks/"+c.source, h, body); code != http.StatusAccepted {
			t.Fatalf("%s: %d %s", c.source, code, answer)
		}
		got := dest.first(t, c.source+":plain:"+c.expectID)
		want := map[string]string{"Webhookd-Event-Type": c.expectType, "Webhookd-Event-Id": c.expectID}
		for k, v := range c.sender {
			want[k] = v
		}
		for _, k := range verify.SchemeDefaults(c.cfg.Scheme).ForwardedHeaders {
			if _, ok := want[k]; !ok {
				want[k] = h.Get(k) // the id headers Sign set
			}
		}
		for k, v := range want {
			if got.Get(k) != v || v == "" {
				t.Errorf("%s: %s = %q, want %q", c.source, k, got.Get(k), v)
			}
		}
		for _, k := range []string{c.signature, "Authorization", "Cookie", "X-Request-Id", "X-Other"} {
			if got.Values(k) != nil {
				t.Errorf("%s: %s forwarded (%q) without being named", c.source, k, got.Get(k))
			}
		}
		if c.source != "github" {
			continue
		}
		got = dest.first(t, "github:named:"+c.expectID)
		for _, k := range named {
			if got.Get(k) == "" || got.Get(k) != h.Get(k) {
				t.Errorf("named: %s = %q, want %q as sent", k, got.Get(k), h.Get(k))
			}
		}
		if got.Values("Cookie") != nil || got.Values("X-Other") != nil {
			t.Errorf("named: Cookie or X-Other forwarded without being named")
		}
		d, err := p.Store.GetEvent(context.Background(), "github", c.expectID, dedupe.DestinationView{})
		if err != nil {
			t.Fatal(err)
		}
		shown := string(gateway.MaskHeaders(d.Headers, ""))
		for _, secret := range []string{"hop-credential", h.Get(c.signature)} {
			if strings.Contains(shown, secret) {
				t.Errorf("the event's headers as shown hold %q: %s", secret, shown)
			}
		}
		if strings.Contains(string(d.Headers), "hop-cookie") {
			t.Errorf("Cookie stored although no destination forwards it: %s", d.Headers)
		}
	}
}

// TestEveryAttemptKept: every call keeps what the destination answered,
// failures as successes: status, headers of note, the first 4 KiB of the
// body (cut, and marked so), the error, and when the next try is due.
func TestEveryAttemptKept(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	big := strings.Repeat("é", 3000) // 6000 bytes, kept as bytes (bytea): the cut may split a rune
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("X-Not-Of-Note", "x")
			w.Header().Set("X-Request-Id", "req-"+strings.Repeat("x", 300)) // kept up to 256 bytes
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte(big))
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("thanks"))
	}))
	t.Cleanup(dest.Close)
	p := pipelinetest.Start(t, pipelinetest.Options{Destinations: map[string]string{"billing": dest.URL}})
	if code, answer := p.Send(t, eventBody("evt_kept")); code != http.StatusAccepted {
		t.Fatalf("%d %s", code, answer)
	}
	key := "stripe:billing:evt_kept"
	pipelinetest.Eventually(t, 15*time.Second, "two finished calls", func() bool {
		return p.Schema.Int(t, `SELECT count(*) FROM delivery_attempts WHERE key = $1 AND state = 'finished'`, key) == 2
	})
	rows, err := p.Schema.Pool.Query(context.Background(), `
SELECT call, COALESCE(status_code, 0), COALESCE(error, ''), COALESCE(answer_headers::text, ''), answer_body, COALESCE(answer_truncated, false), retry_at IS NOT NULL AND retry_at > created_at
FROM delivery_attempts WHERE key = $1 ORDER BY call`, key)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	type kept struct {
		call, status int
		err, headers string
		body         []byte
		truncated    bool
		nextTry      bool
	}
	var got []kept
	for rows.Next() {
		var k kept
		if err := rows.Scan(&k.call, &k.status, &k.err, &k.headers, &k.body, &k.truncated, &k.nextTry); err != nil {
			t.Fatal(err)
		}
		got = append(got, k)
	}
	if len(got) != 2 {
		t.Fatalf("%d attempts kept, want 2", len(got))
	}
	first, second := got[0], got[1]
	if first.status != 502 || first.err == "" || len(first.body) != 4096 || string(first.body) != big[:4096] || !first.truncated || !first.nextTry ||
		!strings.Contains(first.headers, `"X-Request-Id": "req-`+strings.Repeat("x", 252)+`"`) || strings.Contains(first.headers, "X-Not-Of-Note") {
		t.Errorf("failed call kept as status %d, error %q, headers %s, %d body bytes (truncated %v), next try %v",
			first.status, first.err, first.headers, len(first.body), first.truncated, first.nextTry)
	}
	if second.status != 200 || string(second.body) != "thanks" || second.truncated || second.nextTry || !strings.Contains(second.headers, "text/plain") {
		t.Errorf("successful call kept as %+v", second)
	}
}
