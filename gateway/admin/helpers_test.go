package admin_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway"
	"github.com/webhookd/webhookd/gateway/admin"
	"github.com/webhookd/webhookd/internal/testkit/logtest"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/jobs"
)

// destination is a test destination: it answers with the status set
// (and the answer set, if any), and records the Idempotency-Key of every
// call.
type destination struct {
	mu     sync.Mutex
	status int
	keys   []string
	// header and body, when set, are the answer's.
	header http.Header
	body   string
	// gate, when set, holds every call until it is closed.
	gate chan struct{}
	// codes are the statuses it answered, in order.
	codes []int
	// testCalls counts the calls marked Webhookd-Test: 1.
	testCalls int
}

func (d *destination) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	d.mu.Lock()
	d.keys = append(d.keys, r.Header.Get("Idempotency-Key"))
	if r.Header.Get("Webhookd-Test") == "1" {
		d.testCalls++
	}
	code, header, body, gate := d.status, d.header, d.body, d.gate
	d.mu.Unlock()
	if gate != nil {
		<-gate
	}
	d.mu.Lock()
	d.codes = append(d.codes, code)
	d.mu.Unlock()
	for k, v := range header {
		w.Header()[k] = v
	}
	w.WriteHeader(code)
	if body == "" {
		body = `{"ok":true}`
	}
	_, _ = w.Write([]byte(body))
}

// setAnswer sets the status, headers and body of the next answers.
func (d *destination) setAnswer(code int, header http.Header, body string) {
	d.mu.Lock()
	d.status, d.header, d.body = code, header, body
	d.mu.Unlock()
}

// hold makes the next calls wait until the returned func is called.
func (d *destination) hold() (release func()) {
	gate := make(chan struct{})
	d.mu.Lock()
	d.gate = gate
	d.mu.Unlock()
	return sync.OnceFunc(func() { close(gate) })
}

func (d *destination) setStatus(code int) {
	d.mu.Lock()
	d.status = code
	d.mu.Unlock()
}

// calls returns how many calls carried key.
func (d *destination) calls(key string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, k := range d.keys {
		if k == key {
			n++
		}
	}
	return n
}

// answered returns how many calls it answered with code.
func (d *destination) answered(code int) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, c := range d.codes {
		if c == code {
			n++
		}
	}
	return n
}

func (d *destination) total() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.keys)
}

// bundle is one test's pipeline with the admin surface on its own server.
type bundle struct {
	p       *pipelinetest.Pipeline
	dest    *destination
	admin   *admin.Admin
	replays *jobs.Replayer
	srv     *httptest.Server
	gw      *gateway.Server
	logs    *logtest.Buffer
	token   string
}

type options struct {
	// token is the full-access token requests carry; defaults to
	// testToken unless off or unsafeLoopback.
	token string
	// moreTokens and readOnlyTokens are more configured tokens.
	moreTokens, readOnlyTokens []string
	// unsafeLoopback configures no token and opts in to tokenless
	// loopback access; off configures nothing (admin off).
	unsafeLoopback, off bool
	// allowQueueActions serves the dashboard with its actions on (and a
	// read-only one to read-only sessions).
	allowQueueActions bool
	hosts             []string
	now               func() time.Time
	maxAttempts       int
	// loseRequeues makes the replays' own enqueues vanish, as if Redis
	// lost them: only what Postgres records gets the work done.
	loseRequeues bool
	// throttle keeps the default throttle of wrong tokens; without it a
	// bundle allows 1000 (the tests try many wrong tokens from one
	// address).
	throttle bool
	// secureCookie marks session cookies Secure over plain HTTP too.
	secureCookie bool
}

// lostRequeues takes a replay's enqueue and drops it.
type lostRequeues struct{}

func (lostRequeues) Requeue(context.Context, jobs.DeliverPayload) error { return nil }

func (lostRequeues) WakeKeys(context.Context, []string) (int, error) { return 0, nil }

// testToken is the admin token of a bundle that names none.
const testToken = "admin-test-token-0123456789"

const destName = "billing"

func setup(t *testing.T, o options) *bundle {
	t.Helper()
	dest := &destination{status: http.StatusOK}
	ds := httptest.NewServer(dest)
	t.Cleanup(ds.Close)
	p := pipelinetest.Start(t, pipelinetest.Options{
		Destinations: map[string]string{destName: ds.URL},
		MaxAttempts:  o.maxAttempts,
	})
	logs := &logtest.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	gw := gateway.New(gateway.Config{Registry: prometheus.NewRegistry(), Logger: log}, nil, nil)
	if o.token == "" && !o.off && !o.unsafeLoopback {
		o.token = testToken
	}
	cfg := admin.Config{
		ReadOnlyTokens:          o.readOnlyTokens,
		UnsafeTokenlessLoopback: o.unsafeLoopback,
		Hosts:                   o.hosts,
		Now:                     o.now,
		Routes:                  p.Routes,
		Dashboard:               admin.NewDashboard(p.Redis.Client, !o.allowQueueActions),
		Destinations:            jobs.NewDestinations(p.Store, p.Enqueuer, p.Routes, jobs.DestinationsConfig{Logger: log}),
		TestEvents:              jobs.NewTestSender(p.Routes, nil, log),
		Issues:                  p.Store,
		Logger:                  log,
		BulkLimit:               50,
		SecureCookie:            o.secureCookie,
	}
	if !o.throttle {
		cfg.WrongTokenBurst = 1000
	}
	if o.token != "" {
		cfg.Tokens = append([]string{o.token}, o.moreTokens...)
	}
	if o.allowQueueActions {
		cfg.ReadOnlyDashboard = admin.NewDashboard(p.Redis.Client, true)
	}
	var queue interface {
		Requeue(context.Context, jobs.DeliverPayload) error
		WakeKeys(context.Context, []string) (int, error)
	} = p.Enqueuer
	if o.loseRequeues {
		queue = lostRequeues{}
	}
	replays := jobs.NewReplayer(p.Store, queue, p.Routes, jobs.ReplayerConfig{Logger: log})
	adm := admin.New(p.Store, replays, cfg)
	adm.Mount(gw.Echo())
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("admin logs:\n%s", logs.String())
		}
	})
	return &bundle{p: p, dest: dest, admin: adm, replays: replays, srv: srv, gw: gw, logs: logs, token: o.token}
}

// send delivers a signed Stripe event with id and returns its key.
func (b *bundle) send(t *testing.T, id string) string {
	t.Helper()
	code, body := b.p.Send(t, []byte(`{"id":"`+id+`","type":"invoice.paid","data":{"object":{"id":"in_1"}}}`))
	if code != http.StatusAccepted {
		t.Fatalf("send %s: %d %s", id, code, body)
	}
	return jobs.Key(pipelinetest.Source, destName, id, 1)
}

// waitState waits until the event reaches state.
func (b *bundle) waitState(t *testing.T, id, state string) dedupe.EventDetail {
	t.Helper()
	var d dedupe.EventDetail
	pipelinetest.Eventually(t, 20*time.Second, id+" to be "+state, func() bool {
		var err error
		d, err = b.p.Store.GetEvent(t.Context(), pipelinetest.Source, id, dedupe.DestinationView{})
		return err == nil && d.State == state
	})
	return d
}

// do sends an admin request with the bundle's token and decodes a JSON
// answer into out (when not nil).
func (b *bundle) do(t *testing.T, method, path, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, b.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if b.token != "" {
		req.Header.Set("Authorization", "Bearer "+b.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %d, answer is not JSON: %s", method, path, resp.StatusCode, raw)
		}
	}
	return resp.StatusCode
}

// stays asserts cond holds for the whole of d (nothing more happens).
func stays(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !cond() {
			t.Fatalf("%s changed", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
