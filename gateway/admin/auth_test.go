package admin_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

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

func TestAuthLoopbackOnlyWithoutToken(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	if !b.admin.LoopbackOnly() {
		t.Fatal("no token: want loopback-only mode")
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

// TestAuthTokenlessRefusesRebinding: without a token, a loopback peer is
// answered only when Host (and Origin, when sent) names this server. A
// page that DNS rebinding pointed at 127.0.0.1 carries its own name in
// both and is refused, on every admin route.
func TestAuthTokenlessRefusesRebinding(t *testing.T) {
	t.Parallel()
	b := setup(t, options{hosts: []string{"webhookd.test"}})
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
	admin.New(b.p.Store, b.p.Store, b.p.Enqueuer, admin.Config{
		Token: "tok", Routes: b.p.Routes, Dashboard: admin.NewDashboard(b.p.Redis.Client, false),
	}).Mount(gw.Echo())
	req := httptest.NewRequest("POST", "/admin/queues/api/queues/"+b.p.Redis.Queue+":pause", nil)
	req.Header.Set("Authorization", "Bearer tok")
	rec := httptest.NewRecorder()
	gw.ServeHTTP(rec, req)
	if rec.Code == http.StatusMethodNotAllowed || rec.Code == http.StatusUnauthorized {
		t.Errorf("dashboard action with actions allowed: %d %s", rec.Code, rec.Body)
	}
}
