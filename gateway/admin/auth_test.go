package admin_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway"
	"github.com/webhookd/webhookd/gateway/admin"
)

// adminRoutes are every admin route, the dashboard included.
var adminRoutes = []struct{ method, path string }{
	{"GET", "/admin"},
	{"GET", "/admin/"},
	{"GET", "/admin/events"},
	{"GET", "/admin/events/stripe/evt_x"},
	{"POST", "/admin/events/stripe/evt_x/replay"},
	{"POST", "/admin/replay"},
	{"GET", "/admin/view/stripe/evt_x"},
	{"POST", "/admin/view/stripe/evt_x/replay"},
	{"GET", "/admin/queues"},
	{"GET", "/admin/queues/"},
	{"GET", "/admin/queues/api/queues"},
	{"DELETE", "/admin/queues/api/queues/webhookd"},
	{"GET", "/admin/no-such-page"},
}

func TestAuthToken(t *testing.T) {
	t.Parallel()
	b := setup(t, options{token: "s3cret-token"})

	call := func(method, path string, h http.Header) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, b.srv.URL+path, nil)
		for k, v := range h {
			req.Header[k] = v
		}
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for _, r := range adminRoutes {
		for name, h := range map[string]http.Header{
			"no token":      {},
			"wrong token":   {"Authorization": {"Bearer s3cret-tokeN"}},
			"wrong scheme":  {"Authorization": {"Basic s3cret-token"}},
			"prefix token":  {"Authorization": {"Bearer s3cret"}},
			"forged cookie": {"Cookie": {"webhookd_admin=s3cret-token"}},
		} {
			if resp := call(r.method, r.path, h); resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s %s with %s: %d, want 401", r.method, r.path, name, resp.StatusCode)
			}
		}
		resp := call(r.method, r.path, http.Header{"Authorization": {"Bearer s3cret-token"}})
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			t.Errorf("%s %s with the token: %d", r.method, r.path, resp.StatusCode)
		}
	}

	// The dashboard is read-only unless the config allows actions.
	if resp := call("DELETE", "/admin/queues/api/queues/"+b.p.Redis.Queue, http.Header{"Authorization": {"Bearer s3cret-token"}}); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("dashboard DELETE in read-only mode: %d, want 405", resp.StatusCode)
	}

	// A browser signs in once and then uses the cookie.
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).
		PostForm(b.srv.URL+"/admin/login", url.Values{"token": {"s3cret-token"}, "next": {"/admin/"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Fatalf("login: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	cookie := resp.Cookies()[0]
	if strings.Contains(cookie.Value, "s3cret") || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		t.Errorf("session cookie %+v: must not hold the token, must be HttpOnly and SameSite=Strict", cookie)
	}
	withCookie := http.Header{"Cookie": {cookie.Name + "=" + cookie.Value}}
	if resp := call("GET", "/admin/", withCookie); resp.StatusCode != http.StatusOK {
		t.Errorf("browser with session cookie: %d", resp.StatusCode)
	}
	// Another site cannot make that browser replay.
	crossSite := http.Header{"Cookie": withCookie["Cookie"], "Sec-Fetch-Site": {"cross-site"}, "Origin": {"https://evil.example"}}
	if resp := call("POST", "/admin/view/stripe/evt_x/replay", crossSite); resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site replay: %d, want 403", resp.StatusCode)
	}
	if resp, _ := http.PostForm(b.srv.URL+"/admin/login", url.Values{"token": {"nope"}}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("login with a wrong token: %d, want 401", resp.StatusCode)
	}
}

func TestAuthUnsafeTokenlessLoopbackOnlyOnLoopback(t *testing.T) {
	t.Parallel()
	b := setup(t, options{unsafeLoopback: true})
	if b.admin.Mode() != admin.ModeUnsafeTokenlessLoopback {
		t.Fatalf("mode %q, want %q", b.admin.Mode(), admin.ModeUnsafeTokenlessLoopback)
	}
	for _, r := range adminRoutes {
		for _, peer := range []string{"203.0.113.7:40000", "[2001:db8::1]:40000", "10.0.0.2:1"} {
			req := httptest.NewRequest(r.method, r.path, nil)
			req.RemoteAddr = peer
			req.Header.Set("X-Forwarded-For", "127.0.0.1") // must not be trusted
			req.Header.Set("X-Real-Ip", "127.0.0.1")
			rec := httptest.NewRecorder()
			b.gw.ServeHTTP(rec, req)
			if rec.Code != http.StatusForbidden {
				t.Errorf("%s %s from %s: %d, want 403", r.method, r.path, peer, rec.Code)
			}
		}
	}
	for _, peer := range []string{"127.0.0.1:40000", "[::1]:40000"} {
		req := httptest.NewRequest("GET", "http://localhost/admin/events", nil)
		req.RemoteAddr = peer
		rec := httptest.NewRecorder()
		b.gw.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Errorf("GET /admin/events from %s: %d, want 200", peer, rec.Code)
		}
	}
}

// TestAuthTokenlessRefusesRebinding: in the unsafe tokenless mode, a
// loopback peer is answered only when Host (and Origin, when sent) names
// this server. A page that DNS rebinding pointed at 127.0.0.1 carries its
// own name in both and is refused, on every admin route.
func TestAuthTokenlessRefusesRebinding(t *testing.T) {
	t.Parallel()
	b := setup(t, options{unsafeLoopback: true, hosts: []string{"webhookd.test"}})
	_, port, _ := strings.Cut(strings.TrimPrefix(b.srv.URL, "http://"), ":")
	call := func(method, path, host, origin string) int {
		t.Helper()
		req, _ := http.NewRequest(method, b.srv.URL+path, nil)
		req.Host = host
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, r := range adminRoutes {
		for _, h := range []struct{ host, origin string }{
			{"rebind.example:" + port, ""},
			{"rebind.example:" + port, "http://rebind.example:" + port},
			{"localhost:" + port, "http://rebind.example:" + port},
			{"127.0.0.1.nip.io:" + port, ""},
			{"localhost.rebind.example", ""},
			{"localhost:" + port, "null"},
		} {
			if code := call(r.method, r.path, h.host, h.origin); code != http.StatusForbidden {
				t.Errorf("%s %s with Host %q, Origin %q: %d, want 403", r.method, r.path, h.host, h.origin, code)
			}
		}
	}
	for _, h := range []struct{ host, origin string }{
		{"localhost:" + port, ""},
		{"LocalHost:" + port, "http://localhost:" + port},
		{"127.0.0.1:" + port, "http://127.0.0.1:" + port},
		{"[::1]:" + port, ""},
		{"webhookd.test:" + port, "https://webhookd.test"},
	} {
		if code := call("GET", "/admin/events", h.host, h.origin); code != http.StatusOK {
			t.Errorf("GET /admin/events with Host %q, Origin %q: %d, want 200", h.host, h.origin, code)
		}
	}
}

func TestAuthDashboardActionsWhenAllowed(t *testing.T) {
	t.Parallel()
	b := setup(t, options{token: "tok"})
	gw := gateway.New(gateway.Config{Registry: prometheus.NewRegistry()}, nil, nil)
	admin.New(b.p.Store, b.replays, admin.Config{
		Tokens: []string{"tok"}, Routes: b.p.Routes, Dashboard: admin.NewDashboard(b.p.Redis.Client, false),
	}).Mount(gw.Echo())
	req := httptest.NewRequest("POST", "/admin/queues/api/queues/"+b.p.Redis.Queue+":pause", nil)
	req.Header.Set("Authorization", "Bearer tok")
	rec := httptest.NewRecorder()
	gw.ServeHTTP(rec, req)
	if rec.Code == http.StatusMethodNotAllowed || rec.Code == http.StatusUnauthorized {
		t.Errorf("dashboard action with actions allowed: %d %s", rec.Code, rec.Body)
	}
}

// request is one admin request of a test: the method, path, content type
// and body.
type request struct{ method, path, contentType, body string }

// callWith sends r to base with the headers h, not following redirects,
// and returns the status and body.
func callWith(t *testing.T, base string, r request, h http.Header) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(r.method, base+r.path, strings.NewReader(r.body))
	for k, v := range h {
		req.Header[k] = v
	}
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestAuthOffWithoutToken: with no token and no opt-in, admin is off for
// every kind of route (API, pages, dashboard, login, logout), also from
// loopback addressed as localhost and with any bearer: 403 saying how to
// turn it on, as JSON or, for a browser, a page. Only the static assets
// answer.
func TestAuthOffWithoutToken(t *testing.T) {
	t.Parallel()
	b := setup(t, options{off: true})
	if b.admin.Mode() != admin.ModeOff {
		t.Fatalf("mode %q, want off", b.admin.Mode())
	}
	b.send(t, "evt_off")
	routes := append([]struct{ method, path string }{
		{"GET", "/admin/login"},
		{"POST", "/admin/login"},
		{"POST", "/admin/logout"},
		{"GET", "/admin/view/destinations"},
		{"GET", "/admin/destinations"},
		{"GET", "/admin/events/stripe/evt_off"},
	}, adminRoutes...)
	for _, r := range routes {
		for name, h := range map[string]http.Header{
			"nothing":      {},
			"a bearer":     {"Authorization": {"Bearer " + testToken}},
			"an empty one": {"Authorization": {"Bearer "}},
		} {
			rq := request{method: r.method, path: r.path}
			if r.path == "/admin/login" && r.method == "POST" {
				rq.contentType, rq.body = "application/x-www-form-urlencoded", "token="
			}
			code, body := callWith(t, b.srv.URL, rq, h)
			if code != http.StatusForbidden || !strings.Contains(body, "admin is off") || !strings.Contains(body, "admin_token") {
				t.Errorf("%s %s with %s: %d %.200s, want 403 saying admin is off", r.method, r.path, name, code, body)
			}
			if strings.Contains(body, "evt_off") {
				t.Errorf("%s %s with %s: the answer holds an event", r.method, r.path, name)
			}
			h = h.Clone()
			h.Set("Accept", "text/html")
			code, body = callWith(t, b.srv.URL, rq, h)
			if code != http.StatusForbidden || !strings.Contains(body, "<h1>Admin is off</h1>") || !strings.Contains(body, "WEBHOOKD_ADMIN_TOKEN") {
				t.Errorf("browser %s %s with %s: %d %.200s, want the admin-is-off page", r.method, r.path, name, code, body)
			}
		}
	}
	if code, _ := callWith(t, b.srv.URL, request{method: "GET", path: "/admin/assets/admin.css"}, nil); code != http.StatusOK {
		t.Errorf("assets with admin off: %d, want 200", code)
	}
}

// TestAuthRotation: every configured token works, as a bearer and for
// a session; a session lasts only while the token that opened it is
// configured with its role.
func TestAuthRotation(t *testing.T) {
	t.Parallel()
	const oldTok, newTok, roTok = "old-token-0123456789", "new-token-0123456789", "read-token-0123456789"
	b := setup(t, options{token: oldTok, moreTokens: []string{newTok}, readOnlyTokens: []string{roTok}})
	for _, tok := range []string{oldTok, newTok, roTok} {
		if code, _ := callWith(t, b.srv.URL, request{method: "GET", path: "/admin/events"}, http.Header{"Authorization": {"Bearer " + tok}}); code != http.StatusOK {
			t.Errorf("bearer %s: %d, want 200", tok, code)
		}
	}
	oldSession, newSession, roSession := signIn(t, b.srv.URL, oldTok), signIn(t, b.srv.URL, newTok), signIn(t, b.srv.URL, roTok)

	// The same pipeline served by admins configured with other tokens,
	// as after a restart with a new config.
	serve := func(full, ro []string) string {
		gw := gateway.New(gateway.Config{Registry: prometheus.NewRegistry()}, nil, nil)
		admin.New(b.p.Store, b.replays, admin.Config{Tokens: full, ReadOnlyTokens: ro, Routes: b.p.Routes}).Mount(gw.Echo())
		srv := httptest.NewServer(gw)
		t.Cleanup(srv.Close)
		return srv.URL
	}
	get := func(base string, c *http.Cookie) int {
		code, _ := callWith(t, base, request{method: "GET", path: "/admin/events"}, http.Header{"Cookie": {c.Name + "=" + c.Value}})
		return code
	}
	for _, tc := range []struct {
		name    string
		full    []string
		ro      []string
		session *http.Cookie
		expect  int
	}{
		{"old token removed: its session", []string{newTok}, []string{roTok}, oldSession, http.StatusUnauthorized},
		{"old token removed: the new token's session", []string{newTok}, []string{roTok}, newSession, http.StatusOK},
		{"new token removed: the old token's session", []string{oldTok}, []string{roTok}, oldSession, http.StatusOK},
		{"new token removed: its session", []string{oldTok}, []string{roTok}, newSession, http.StatusUnauthorized},
		{"read-only token removed: its session", []string{oldTok, newTok}, nil, roSession, http.StatusUnauthorized},
		{"old token made read-only: its full session", []string{newTok}, []string{oldTok}, oldSession, http.StatusUnauthorized},
		{"read-only token made full: its read-only session", []string{roTok}, nil, roSession, http.StatusUnauthorized},
		{"unchanged: the read-only session", []string{oldTok, newTok}, []string{roTok}, roSession, http.StatusOK},
	} {
		if code := get(serve(tc.full, tc.ro), tc.session); code != tc.expect {
			t.Errorf("%s: %d, want %d", tc.name, code, tc.expect)
		}
	}

	// A read-only session cannot be made a full one by editing its role.
	exp, rest, _ := strings.Cut(roSession.Value, ".")
	_, mac, _ := strings.Cut(rest, ".")
	forged := &http.Cookie{Name: roSession.Name, Value: exp + ".full." + mac}
	if code, _ := callWith(t, b.srv.URL, request{method: "POST", path: "/admin/destinations/stripe/" + destName + "/pause"},
		http.Header{"Cookie": {forged.Name + "=" + forged.Value}}); code != http.StatusUnauthorized {
		t.Errorf("read-only session relabelled full: %d, want 401", code)
	}
}

// signIn posts token to base's login form and returns the session cookie.
func signIn(t *testing.T, base, token string) *http.Cookie {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.PostForm(base+"/admin/login", url.Values{"token": {token}, "next": {"/admin/"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Fatalf("login: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	return resp.Cookies()[0]
}

// TestAuthReadOnly: a read-only token, as a bearer or a session, reads
// every page, the API and the dashboard, but every route that changes
// something answers 403 and nothing changes: the failed run stays as it
// was, nothing is paused in Postgres or Redis, the destination is not
// called. The pages hide the replay and pause controls.
func TestAuthReadOnly(t *testing.T) {
	t.Parallel()
	const roTok = "read-only-token-0123456789"
	b := setup(t, options{readOnlyTokens: []string{roTok}, allowQueueActions: true})
	b.dest.setStatus(http.StatusBadRequest)
	key := b.send(t, "evt_ro")
	b.waitState(t, "evt_ro", dedupe.StatusFailed)
	runs := func() string {
		var s string
		if err := b.p.Schema.Pool.QueryRow(t.Context(), `SELECT string_agg(key || ' ' || status || ' ' || attempts || ' ' || calls || ' ' ||
			coalesce(replayed_by, '-'), ',' ORDER BY key) FROM job_runs`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := runs()
	b.dest.setStatus(http.StatusOK)

	q := b.p.Redis.Queue
	const form, js = "application/x-www-form-urlencoded", "application/json"
	mutating := []request{
		{"POST", "/admin/events/stripe/evt_ro/replay", "", ""},
		{"POST", "/admin/events/stripe/evt_ro/replay?force=true&destination=" + destName + "&reason=x", "", ""},
		{"POST", "/admin/events/stripe/evt_ro/replay", js, `{"force":true,"destination":"` + destName + `","reason":"x"}`},
		{"POST", "/admin/replay", js, `{"source":"stripe","dry_run":false}`},
		{"POST", "/admin/replay", js, `{"source":"stripe","dry_run":false,"force":true,"reason":"x"}`},
		{"POST", "/admin/view/stripe/evt_ro/replay", form, "force=false"},
		{"POST", "/admin/view/stripe/evt_ro/replay", form, "force=true&reason=x"},
		{"POST", "/admin/view/replay?source=stripe&id=evt_ro", form, "force=false"},
		{"POST", "/admin/destinations/stripe/" + destName + "/pause", "", ""},
		{"POST", "/admin/destinations/stripe/" + destName + "/resume", "", ""},
		{"POST", "/admin/view/destinations/pause", form, "source=stripe&destination=" + destName},
		{"POST", "/admin/view/destinations/resume", form, "source=stripe&destination=" + destName},
		{"POST", "/admin/queues/api/queues/" + q + ":pause", "", ""},
		{"DELETE", "/admin/queues/api/queues/" + q, "", ""},
		{"POST", "/admin/queues/api/queues/" + q + "/archived_tasks:run_all", "", ""},
		{"DELETE", "/admin/queues/api/queues/" + q + "/archived_tasks:delete_all", "", ""},
		{"PUT", "/admin/events", "", ""},
	}
	session := signIn(t, b.srv.URL, roTok)
	creds := map[string]http.Header{
		"bearer":  {"Authorization": {"Bearer " + roTok}},
		"session": {"Cookie": {session.Name + "=" + session.Value}},
	}
	for name, h := range creds {
		for _, r := range mutating {
			code, body := callWith(t, b.srv.URL, r, h)
			if code != http.StatusForbidden || !strings.Contains(body, "read-only admin token") {
				t.Errorf("%s %s %s with the read-only %s: %d %.200s, want 403", r.method, r.path, r.body, name, code, body)
			}
		}
		for _, path := range []string{"/admin/", "/admin/events", "/admin/events/stripe/evt_ro", "/admin/view?source=stripe&id=evt_ro",
			"/admin/destinations", "/admin/view/destinations", "/admin/queues/", "/admin/queues/api/queues"} {
			code, body := callWith(t, b.srv.URL, request{method: "GET", path: path}, h)
			if code != http.StatusOK {
				t.Errorf("GET %s with the read-only %s: %d %.200s, want 200", path, name, code, body)
			}
			for _, control := range []string{`id="replay-form"`, `id="force-form"`, `class="pause"`, `class="resume"`} {
				if strings.Contains(body, control) {
					t.Errorf("GET %s with the read-only %s shows %s", path, name, control)
				}
			}
		}
	}
	page := func(h http.Header) http.Header {
		h = h.Clone()
		h.Set("Accept", "text/html")
		return h
	}
	if _, body := callWith(t, b.srv.URL, request{method: "GET", path: "/admin/events/stripe/evt_ro"}, page(creds["session"])); !strings.Contains(body, `id="read-only-note"`) {
		t.Error("the event page does not say the session is read-only")
	}
	// The full token sees the controls.
	full := http.Header{"Authorization": {"Bearer " + testToken}}
	if _, body := callWith(t, b.srv.URL, request{method: "GET", path: "/admin/events/stripe/evt_ro"}, page(full)); !strings.Contains(body, `id="replay-form"`) {
		t.Error("the full token's event page has no replay form")
	}
	if _, body := callWith(t, b.srv.URL, request{method: "GET", path: "/admin/view/destinations"}, full); !strings.Contains(body, `class="pause"`) {
		t.Error("the full token's destinations page has no pause form")
	}

	// Nothing changed: the run, the pauses, the queue, the destination.
	stays(t, time.Second, "the destination's calls", func() bool { return b.dest.calls(key) == 1 && b.dest.total() == 1 })
	if after := runs(); after != before {
		t.Errorf("runs changed under read-only requests:\nbefore %s\nafter  %s", before, after)
	}
	if n := b.p.Schema.Int(t, `SELECT count(*) FROM destination_pauses`); n != 0 {
		t.Errorf("%d destinations paused by read-only requests", n)
	}
	if info, err := asynq.NewInspectorFromRedisClient(b.p.Redis.Client).GetQueueInfo(q); err == nil && info.Paused {
		t.Error("the queue was paused by a read-only request")
	}
	if paused, _ := b.p.Redis.Client.SMembers(t.Context(), "asynq:queues:paused").Result(); len(paused) > 0 {
		t.Errorf("paused queues in Redis: %v", paused)
	}

	// A read-only session still signs out.
	code, _ := callWith(t, b.srv.URL, request{method: "POST", path: "/admin/logout"}, creds["session"])
	if code != http.StatusSeeOther {
		t.Errorf("read-only logout: %d, want 303", code)
	}
	// And the full token may do what the read-only one may not.
	if code, _ := callWith(t, b.srv.URL, request{method: "POST", path: "/admin/queues/api/queues/" + q + ":pause"}, full); code != http.StatusNoContent && code != http.StatusOK {
		t.Errorf("dashboard pause with the full token: %d", code)
	}
}
