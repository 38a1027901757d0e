package listen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/gateway/admin"
	"github.com/webhookd/webhookd/gateway/admin/adminclient"
)

// goodToken is the token fakeGateway takes.
const goodToken = "secret-token-0123456789"

func adminClient(t *testing.T, server, token string) *adminclient.Client {
	t.Helper()
	c, err := adminclient.New(server, token)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fakeGateway serves a scripted event stream: two events after 1.0,
// nothing after 1.2 (answered after the asked wait, up to 100ms).
type fakeGateway struct {
	status int // answer every request with this status when set
	mu     sync.Mutex
	asked  []url.Values
}

func (g *fakeGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	g.asked = append(g.asked, r.URL.Query())
	status := g.status
	g.mu.Unlock()
	if r.URL.Path != "/admin/events/stream" || r.Header.Get("Authorization") != "Bearer "+goodToken {
		http.Error(w, `{"error":"missing or wrong admin token"}`, http.StatusUnauthorized)
		return
	}
	if status != 0 {
		http.Error(w, `{"error":"scripted"}`, status)
		return
	}
	ev := func(cursor, id string) admin.StreamEventJSON {
		return admin.StreamEventJSON{Cursor: cursor, Key: "src:listen:" + id, Source: "src", EventID: id, EventType: "t",
			ReceivedAt: time.Now().Add(-time.Second), ContentType: "application/json", Payload: []byte(`{"id":"` + id + `"}`)}
	}
	var page admin.StreamJSON
	switch after := r.URL.Query().Get("after"); after {
	case "now":
		page = admin.StreamJSON{Events: []admin.StreamEventJSON{}, Next: "1.0"}
	case "1.0":
		page = admin.StreamJSON{Events: []admin.StreamEventJSON{ev("1.1", "e1"), ev("1.2", "e2")}, Next: "1.2"}
	case "1.1":
		page = admin.StreamJSON{Events: []admin.StreamEventJSON{ev("1.2", "e2")}, Next: "1.2"}
	default:
		wait, _ := time.ParseDuration(r.URL.Query().Get("wait"))
		time.Sleep(min(wait, 100*time.Millisecond))
		page = admin.StreamJSON{Events: []admin.StreamEventJSON{}, Next: after}
	}
	zero := 0
	page.Behind = &zero
	_ = json.NewEncoder(w).Encode(page)
}

// fakeApp answers each call with answer(event id, call number).
type fakeApp struct {
	answer func(id string, n int) int
	mu     sync.Mutex
	calls  []string // event id and Webhookd-Attempt
}

func (a *fakeApp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("Webhookd-Event-Id")
	a.mu.Lock()
	a.calls = append(a.calls, id+"#"+r.Header.Get("Webhookd-Attempt"))
	n := 0
	for _, c := range a.calls {
		if strings.HasPrefix(c, id+"#") {
			n++
		}
	}
	a.mu.Unlock()
	w.WriteHeader(a.answer(id, n))
}

func (a *fakeApp) seen() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.calls...)
}

// runUntil runs Run until cond holds (or 10s pass), then stops it as a
// signal would, and returns its output (events, notices) and Run's
// error.
func runUntil(t *testing.T, cfg Config, cond func() bool) (string, string, error) {
	t.Helper()
	var out, errOut safeBuffer
	cfg.Out, cfg.Err, cfg.RetryMax, cfg.Wait = &out, &errOut, 20*time.Millisecond, 50*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() && time.Now().Before(deadline) {
		select {
		case err := <-done:
			cancel()
			return out.String(), errOut.String(), err
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	select {
	case err := <-done:
		return out.String(), errOut.String(), err
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
		return "", "", nil
	}
}

type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRunForwardsRetriesAndResumes: a 500 is retried with the same key
// and a higher Webhookd-Attempt, a 400 is the app's verdict and the
// stream goes on, the state file ends at the last cursor; a run stopped
// while the app is down keeps the event in flight, and the next run
// resumes with it, its attempt counting on.
func TestRunForwardsRetriesAndResumes(t *testing.T) {
	t.Parallel()
	gw := httptest.NewServer(&fakeGateway{})
	t.Cleanup(gw.Close)
	appAnswers := &fakeApp{answer: func(id string, n int) int {
		switch {
		case id == "e1" && n == 1:
			return http.StatusInternalServerError
		case id == "e2":
			return http.StatusBadRequest
		}
		return http.StatusOK
	}}
	app := httptest.NewServer(appAnswers)
	t.Cleanup(app.Close)
	state := filepath.Join(t.TempDir(), "state.json")
	cfg := Config{Admin: adminClient(t, gw.URL, goodToken), ForwardTo: app.URL + "/hooks", StatePath: state}

	out, notices, err := runUntil(t, cfg, func() bool { return len(appAnswers.seen()) >= 3 })
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, notices)
	}
	if got := strings.Join(appAnswers.seen(), " "); got != "e1#1 e1#2 e2#1" {
		t.Errorf("calls = %s, want e1#1 e1#2 e2#1", got)
	}
	if !strings.Contains(out, "e1  → 200 after 2 calls") || !strings.Contains(out, "e2  → 400 refused, not retried") {
		t.Errorf("output:\n%s", out)
	}
	if strings.Contains(out+notices, goodToken) {
		t.Errorf("the token was printed:\n%s%s", out, notices)
	}
	st, err := loadState(state)
	if err != nil || st.Cursor != "1.2" || st.Inflight != nil || st.Server != gw.URL {
		t.Fatalf("state after the run: %+v, %v; want cursor 1.2", st, err)
	}

	// The app goes down while e1 is forwarded; the run is stopped.
	down := &fakeApp{answer: func(string, int) int { return http.StatusServiceUnavailable }}
	app2 := httptest.NewServer(down)
	t.Cleanup(app2.Close)
	state2 := filepath.Join(t.TempDir(), "state.json")
	cfg.ForwardTo, cfg.StatePath = app2.URL, state2
	_, notices, err = runUntil(t, cfg, func() bool { return len(down.seen()) >= 2 })
	if err != nil || !strings.Contains(notices, "HTTP 503 for src e1; retrying") {
		t.Fatalf("Run while the app is down: %v\n%s", err, notices)
	}
	st, _ = loadState(state2)
	if st.Cursor != "1.0" || st.Inflight == nil || st.Inflight.Cursor != "1.1" || st.Inflight.Calls < 2 {
		t.Fatalf("state after a stop mid-retry: %+v; want cursor 1.0 and e1 in flight", st)
	}
	calls := st.Inflight.Calls
	up := &fakeApp{answer: func(string, int) int { return http.StatusOK }}
	app3 := httptest.NewServer(up)
	t.Cleanup(app3.Close)
	cfg.ForwardTo = app3.URL
	_, notices, err = runUntil(t, cfg, func() bool { return len(up.seen()) >= 2 })
	if err != nil || !strings.Contains(notices, "resuming after cursor 1.0") {
		t.Fatalf("Run resuming: %v\n%s", err, notices)
	}
	if got := up.seen(); len(got) != 2 || got[0] != "e1#"+strconv.Itoa(calls+1) || got[1] != "e2#1" {
		t.Errorf("after resuming: %v, want e1 at attempt %d, then e2", got, calls+1)
	}
}

// TestRunStopsOnARefusal: a gateway that refuses the token ends the run
// with the admin client's error, which says what to do and shows no
// token; one that
// fails (5xx) is retried until it answers.
func TestRunStopsOnARefusal(t *testing.T) {
	t.Parallel()
	gw := &fakeGateway{}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	const wrong = "a-wrong-token-0123456789"
	cfg := Config{Admin: adminClient(t, srv.URL, wrong), ForwardTo: "http://localhost:1/x", StatePath: filepath.Join(t.TempDir(), "s.json")}
	_, notices, err := runUntil(t, cfg, func() bool { return false })
	var ae *adminclient.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized || strings.Contains(err.Error()+notices, wrong) ||
		!strings.Contains(err.Error(), "WEBHOOKD_ADMIN_TOKEN") {
		t.Fatalf("Run with a wrong token: %v", err)
	}

	gw.mu.Lock()
	gw.status = http.StatusServiceUnavailable
	gw.mu.Unlock()
	cfg.Admin = adminClient(t, srv.URL, goodToken)
	_, notices, err = runUntil(t, cfg, func() bool {
		gw.mu.Lock()
		defer gw.mu.Unlock()
		return len(gw.asked) >= 4
	})
	if err != nil || !strings.Contains(notices, "the gateway is unreachable (webhookd answered 503 Service Unavailable: scripted); retrying") {
		t.Fatalf("Run against a failing gateway: %v\n%s", err, notices)
	}

	cfg.ForwardTo = "http://example.com/hooks"
	if _, _, err := runUntil(t, cfg, func() bool { return false }); !errors.Is(err, ErrRemoteForward) {
		t.Fatalf("Run forwarding to another machine: %v, want ErrRemoteForward", err)
	}
}

// TestRunRefusesAnotherGatewaysState: a cursor is a position in one
// gateway's database, so a state file of another gateway is refused
// unless --from starts over.
func TestRunRefusesAnotherGatewaysState(t *testing.T) {
	t.Parallel()
	gw := httptest.NewServer(&fakeGateway{})
	t.Cleanup(gw.Close)
	path := filepath.Join(t.TempDir(), "state.json")
	if err := saveState(path, state{Server: "https://hooks.other.example", Cursor: "99.1"}); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Admin: adminClient(t, gw.URL, goodToken), ForwardTo: "http://localhost:1/x", StatePath: path}
	if _, _, err := runUntil(t, cfg, func() bool { return false }); err == nil || !strings.Contains(err.Error(), "follows https://hooks.other.example") {
		t.Fatalf("Run on another gateway's state: %v", err)
	}
	cfg.From = "now"
	_, notices, err := runUntil(t, cfg, func() bool { st, _ := loadState(path); return st.Cursor == "1.0" })
	if err != nil || !strings.Contains(notices, "starting from now") {
		t.Fatalf("Run with --from now on another gateway's state: %v\n%s", err, notices)
	}
}
