package jobs_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/testkit/logtest"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/internal/testkit/redistest"
	"github.com/webhookd/webhookd/jobs"
)

const (
	oauthClientID     = "webhookd-client"
	oauthClientSecret = "client-secret-s3cr3t"
)

// tokenServer is an OAuth2 token endpoint (client credentials) that
// hands out tok-secret-1, tok-secret-2, … and counts its fetches; the
// destination it guards refuses a revoked token with a 401.
type tokenServer struct {
	*httptest.Server
	mu      sync.Mutex
	fetches int
	fetchAt time.Time // the latest fetch
	scopes  []string
	revoked map[string]bool
}

func newTokenServer(t *testing.T, expiresIn int) *tokenServer {
	t.Helper()
	ts := &tokenServer{revoked: map[string]bool{}}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, secret, _ := r.BasicAuth()
		if r.PostFormValue("grant_type") != "client_credentials" || id != oauthClientID || secret != oauthClientSecret {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"invalid_client","error_description":"bad secret ` + secret + `"}`))
			return
		}
		time.Sleep(100 * time.Millisecond) // concurrent calls pile up behind one fetch
		ts.mu.Lock()
		ts.fetches++
		n := ts.fetches
		ts.fetchAt = time.Now()
		ts.scopes = strings.Fields(r.PostFormValue("scope"))
		ts.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"access_token": fmt.Sprintf("tok-secret-%d", n), "token_type": "Bearer", "expires_in": expiresIn,
		})
	}))
	t.Cleanup(ts.Close)
	return ts
}

func (ts *tokenServer) fetched() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.fetches
}

func (ts *tokenServer) revoke(token string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.revoked[token] = true
}

// guard answers 200 to a call with a token the server handed out and
// has not revoked, else, after 200ms (so that calls sent together are
// refused together), 401.
func (ts *tokenServer) guard(_ int, r *http.Request, w http.ResponseWriter) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer tok-secret-")
	ts.mu.Lock()
	refused := !ok || ts.revoked["tok-secret-"+tok]
	ts.mu.Unlock()
	if refused {
		time.Sleep(200 * time.Millisecond)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func oauthSpec(ts *tokenServer, secret string) *jobs.AuthSpec {
	return &jobs.AuthSpec{OAuth2: &jobs.OAuth2Spec{TokenURL: ts.URL + "/token", ClientID: oauthClientID, ClientSecret: secret,
		Scopes: []string{"hooks.write", "hooks.read"}}}
}

// oauthBundle is a worker delivering to a destination guarded by ts,
// its log kept.
func oauthBundle(t *testing.T, ts *tokenServer, secret string, maxAttempts int) (*bundle, *destination, *queue, *logtest.Buffer) {
	t.Helper()
	d := newDestination(t, ts.guard)
	logs := &logtest.Buffer{}
	b := setup(t, handlerOptions{
		dest:   jobs.DestinationSpec{URL: d.URL, MaxAttempts: maxAttempts, Auth: oauthSpec(ts, secret)},
		logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	return b, d, b.startWorker(t), logs
}

// enqueue records and hands off events of source "src".
func (b *bundle) enqueue(t testing.TB, q *queue, ids ...string) {
	t.Helper()
	var refs []dedupe.EventRef
	for _, id := range ids {
		b.record(t, id, fmt.Sprintf(`{"id":%q}`, id))
		refs = append(refs, dedupe.EventRef{Source: "src", ExternalID: id})
	}
	if _, err := q.enqueuer.EnqueueEvents(testCtx(t), refs); err != nil {
		t.Fatal(err)
	}
}

// noCredential fails t when a log line, a run or a call's row holds the
// client secret or a token.
func noCredential(t *testing.T, b *bundle, logs *logtest.Buffer) {
	t.Helper()
	for _, s := range []string{oauthClientSecret, "tok-secret"} {
		if strings.Contains(logs.String(), s) {
			t.Errorf("the log holds %q", s)
		}
		if n := b.schema.Int(t, `SELECT count(*) FROM job_runs j LEFT JOIN delivery_attempts a ON a.key = j.key
			WHERE j::text LIKE '%'||$1||'%' OR a::text LIKE '%'||$1||'%'`, s); n != 0 {
			t.Errorf("%d rows of runs or their calls hold %q", n, s)
		}
	}
}

// TestOAuth2SharedToken: concurrent calls to a destination wait for one
// token fetch and all carry that token, with the configured scopes.
func TestOAuth2SharedToken(t *testing.T) {
	t.Parallel()
	ts := newTokenServer(t, 3600)
	b, d, q, logs := oauthBundle(t, ts, oauthClientSecret, 3)
	var ids []string
	for i := range 24 {
		ids = append(ids, fmt.Sprintf("evt_%d", i))
	}
	b.enqueue(t, q, ids...)
	pipelinetest.Eventually(t, 20*time.Second, "every run done", func() bool {
		return b.schema.Int(t, `SELECT count(*) FROM job_runs WHERE status = 'done'`) == len(ids)
	})
	if n := ts.fetched(); n != 1 {
		t.Errorf("the token was fetched %d times, want once for every call", n)
	}
	if got := strings.Join(ts.scopes, " "); got != "hooks.write hooks.read" {
		t.Errorf("scopes asked: %q", got)
	}
	calls := d.Calls()
	if len(calls) != len(ids) {
		t.Errorf("%d calls, want %d", len(calls), len(ids))
	}
	for _, c := range calls {
		if c.Header.Get("Authorization") != "Bearer tok-secret-1" {
			t.Fatalf("a call carried %q", c.Header.Get("Authorization"))
		}
	}
	noCredential(t, b, logs)
}

// TestOAuth2RefetchOn401: a revoked token is refused with a 401; the
// call fetches a new token once and tries again, and that answer counts:
// the run is done at its first call, no attempt spent.
func TestOAuth2RefetchOn401(t *testing.T) {
	t.Parallel()
	ts := newTokenServer(t, 3600)
	b, d, q, logs := oauthBundle(t, ts, oauthClientSecret, 3)
	b.enqueue(t, q, "evt_1")
	pipelinetest.Eventually(t, 10*time.Second, "the first run done", func() bool { return b.status(t, "src:dst:evt_1") == dedupe.StatusDone })
	ts.revoke("tok-secret-1")
	b.enqueue(t, q, "evt_2")
	pipelinetest.Eventually(t, 10*time.Second, "the second run done", func() bool { return b.status(t, "src:dst:evt_2") == dedupe.StatusDone })
	if n := ts.fetched(); n != 2 {
		t.Errorf("the token was fetched %d times, want 2 (once more after the 401)", n)
	}
	var got []string
	for _, c := range d.Calls() {
		if c.EventID == "evt_2" {
			got = append(got, c.Header.Get("Authorization"))
		}
	}
	if strings.Join(got, ",") != "Bearer tok-secret-1,Bearer tok-secret-2" {
		t.Errorf("evt_2's tries carried %q, want the revoked token then the new one", got)
	}
	if r := b.run(t, "src:dst:evt_2"); r.Attempts != 0 || r.Calls != 1 {
		t.Errorf("evt_2's run: %d attempts, %d calls; want 0 and 1 (the refetch is part of the call)", r.Attempts, r.Calls)
	}
	// A token that is refused again is the call's answer: a 401 fails
	// for good, with one refetch, not a loop.
	ts.revoke("tok-secret-2")
	ts.revoke("tok-secret-3")
	b.enqueue(t, q, "evt_3")
	pipelinetest.Eventually(t, 10*time.Second, "the third run failed", func() bool { return b.status(t, "src:dst:evt_3") == dedupe.StatusFailed })
	if n := ts.fetched(); n != 3 {
		t.Errorf("the token was fetched %d times, want 3", n)
	}
	noCredential(t, b, logs)
}

// TestOAuth2TokenExpiry: a token is fetched anew shortly before it
// expires, without a 401.
func TestOAuth2TokenExpiry(t *testing.T) {
	t.Parallel()
	ts := newTokenServer(t, 6) // renewed after 4.5s
	b, d, q, _ := oauthBundle(t, ts, oauthClientSecret, 3)
	b.enqueue(t, q, "evt_1")
	pipelinetest.Eventually(t, 10*time.Second, "the first run done", func() bool { return b.status(t, "src:dst:evt_1") == dedupe.StatusDone })
	b.enqueue(t, q, "evt_2")
	pipelinetest.Eventually(t, 10*time.Second, "the second run done", func() bool { return b.status(t, "src:dst:evt_2") == dedupe.StatusDone })
	if n := ts.fetched(); n != 1 {
		t.Errorf("the token was fetched %d times before it was due, want 1", n)
	}
	ts.mu.Lock()
	due := time.Until(ts.fetchAt.Add(4600 * time.Millisecond))
	ts.mu.Unlock()
	if due < 0 {
		t.Fatal("the first two runs took longer than the token's time before its renewal")
	}
	time.Sleep(due)
	b.enqueue(t, q, "evt_3")
	pipelinetest.Eventually(t, 10*time.Second, "the third run done", func() bool { return b.status(t, "src:dst:evt_3") == dedupe.StatusDone })
	if n := ts.fetched(); n != 2 {
		t.Errorf("the token was fetched %d times, want 2: once more as it was about to expire", n)
	}
	for _, c := range d.Calls() {
		if c.EventID == "evt_3" && c.Header.Get("Authorization") != "Bearer tok-secret-2" {
			t.Errorf("evt_3 carried %q, want the new token", c.Header.Get("Authorization"))
		}
	}
}

// TestOAuth2WrongSecret: a token endpoint that refuses the client is a
// failed attempt whose error says so, without the secret or the
// endpoint's answer; the destination is never called.
func TestOAuth2WrongSecret(t *testing.T) {
	t.Parallel()
	ts := newTokenServer(t, 3600)
	b, d, q, logs := oauthBundle(t, ts, "wrong-"+oauthClientSecret, 2)
	b.enqueue(t, q, "evt_1")
	pipelinetest.Eventually(t, 10*time.Second, "the run dead", func() bool { return b.status(t, "src:dst:evt_1") == dedupe.StatusDead })
	r := b.run(t, "src:dst:evt_1")
	if r.LastError == nil || !strings.Contains(*r.LastError, `answered HTTP 401 "invalid_client"`) {
		t.Errorf("last_error %v, want the token endpoint's refusal", r.LastError)
	}
	if n := len(d.Calls()); n != 0 {
		t.Errorf("the destination got %d calls without a token", n)
	}
	if !strings.Contains(logs.String(), "invalid_client") {
		t.Errorf("no log line says why: %s", logs.String())
	}
	noCredential(t, b, logs)
}

// TestDestinationStatusHoldsNoCredential: what the admin API and page
// show of a destination (Destinations.List) names no credential: not the
// OAuth2 client secret or a token, not auth's values, not a password or
// a token in the URL.
func TestDestinationStatusHoldsNoCredential(t *testing.T) {
	t.Parallel()
	ts := newTokenServer(t, 3600)
	b := setup(t, handlerOptions{})
	routes := jobs.Routes{"src": {
		"oauth":  buildDestination(t, jobs.DestinationSpec{Name: "oauth", URL: "https://u:url-secret-pw@127.0.0.1:1/h?token=url-secret-q", Auth: oauthSpec(ts, oauthClientSecret)}),
		"bearer": buildDestination(t, jobs.DestinationSpec{Name: "bearer", URL: "https://127.0.0.1:1/", Auth: &jobs.AuthSpec{Bearer: "bearer-secret"}}),
		"basic":  buildDestination(t, jobs.DestinationSpec{Name: "basic", URL: "https://127.0.0.1:1/", Auth: &jobs.AuthSpec{Basic: &jobs.BasicAuthSpec{User: "u", Password: "basic-secret"}}}),
		"nats":   buildDestination(t, jobs.DestinationSpec{Name: "nats", URL: "nats://user:nats-secret@127.0.0.1:4222", Subject: "s"}),
	}}
	// The OAuth2 destination has fetched its token.
	h := jobs.NewHandler(b.store, jobs.HandlerConfig{Routes: routes, Lease: time.Minute, Logger: b.logger})
	b.record(t, "evt_1", `{}`)
	_ = h.Deliver(testCtx(t), jobs.DeliverPayload{Source: "src", EventID: "evt_1", Destination: "oauth"})
	if ts.fetched() != 1 {
		t.Fatalf("the token was fetched %d times, want 1", ts.fetched())
	}
	r := redistest.New(t)
	list, err := jobs.NewDestinations(b.store, jobs.NewEnqueuer(r.Client, r.Queue, routes), routes, jobs.DestinationsConfig{Logger: b.logger}).List(testCtx(t))
	if err != nil || len(list) != 4 {
		t.Fatalf("list: %v, %d destinations", err, len(list))
	}
	out, _ := json.Marshal(list)
	shown := string(out) + fmt.Sprintf("%+v", list)
	for _, s := range []string{oauthClientSecret, "tok-secret", "bearer-secret", "basic-secret", "url-secret", "nats-secret"} {
		if strings.Contains(shown, s) {
			t.Errorf("the destinations' status shows %q: %s", s, out)
		}
	}
}

// TestOAuth2ConcurrentRefetch: calls that all find the shared token
// revoked at once fetch one new token between them, each tries again
// once with it, and the log says so.
func TestOAuth2ConcurrentRefetch(t *testing.T) {
	t.Parallel()
	ts := newTokenServer(t, 3600)
	b, d, q, logs := oauthBundle(t, ts, oauthClientSecret, 3)
	b.enqueue(t, q, "evt_first")
	pipelinetest.Eventually(t, 10*time.Second, "the first run done", func() bool { return b.status(t, "src:dst:evt_first") == dedupe.StatusDone })
	ts.revoke("tok-secret-1")
	var ids []string
	for i := range 16 {
		ids = append(ids, fmt.Sprintf("evt_%d", i))
	}
	b.enqueue(t, q, ids...)
	pipelinetest.Eventually(t, 20*time.Second, "every run done", func() bool {
		return b.schema.Int(t, `SELECT count(*) FROM job_runs WHERE status = 'done' AND attempts = 0`) == len(ids)+1
	})
	if n := ts.fetched(); n != 2 {
		t.Errorf("the token was fetched %d times, want 2: one refetch shared by the calls refused together", n)
	}
	tries := map[string][]string{}
	for _, c := range d.Calls() {
		tries[c.EventID] = append(tries[c.EventID], c.Header.Get("Authorization"))
	}
	for _, id := range ids {
		got := tries[id]
		if len(got) == 0 || got[len(got)-1] != "Bearer tok-secret-2" || len(got) > 2 {
			t.Errorf("%s's tries carried %q, want at most one refused then the new token", id, got)
		}
	}
	if !strings.Contains(logs.String(), `"oauth2_token_refetched":true`) {
		t.Error("no log line says the token was fetched again")
	}
}
