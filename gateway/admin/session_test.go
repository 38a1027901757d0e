package admin_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestAdminPagesRefuseFraming: every admin answer, signed in or not,
// forbids framing (X-Frame-Options and the CSP's frame-ancestors); the
// pages, the queue dashboard's included, admit no inline script or
// style (the dashboard's styles only with the answer's nonce).
func TestAdminPagesRefuseFraming(t *testing.T) {
	t.Parallel()
	b := setup(t, options{token: "tok"})
	for _, tc := range []struct {
		path     string
		auth     bool
		expectCS string // a directive the CSP must hold
	}{
		{"/admin/login", false, "script-src 'self'"},
		{"/admin/", false, "script-src 'self'"},
		{"/admin/", true, "script-src 'self'"},
		{"/admin/events", true, "default-src 'none'"},
		{"/admin/view/stripe/evt_none", true, "script-src 'self'"},
		{"/admin/assets/admin.css", false, "default-src 'none'"},
		{"/admin/queues/", true, "script-src 'self'; img-src"},
		{"/admin/queues/queues/webhookd", true, "connect-src 'self'"},
	} {
		req, _ := http.NewRequest("GET", b.srv.URL+tc.path, nil)
		req.Header.Set("Accept", "text/html")
		if tc.auth {
			req.Header.Set("Authorization", "Bearer tok")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		csp := resp.Header.Get("Content-Security-Policy")
		if resp.Header.Get("X-Frame-Options") != "DENY" || !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, tc.expectCS) {
			t.Errorf("GET %s (auth %v): %d, X-Frame-Options %q, CSP %q", tc.path, tc.auth, resp.StatusCode,
				resp.Header.Get("X-Frame-Options"), csp)
		}
		if strings.Contains(csp, "unsafe-inline") {
			t.Errorf("GET %s: CSP admits inline code: %q", tc.path, csp)
		}
	}
	resp, err := http.Get(b.srv.URL + "/admin/assets/admin.js")
	if err != nil {
		t.Fatal(err)
	}
	js, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(js), "data-confirm") {
		t.Errorf("admin.js without a session: %d %.80s", resp.StatusCode, js)
	}
}

// TestAdminSessionExpiresAndLogsOut: the session cookie lasts 12 hours
// (Max-Age, and the server refuses it after that too), and POST
// /admin/logout clears it; logging out from another site is refused like
// every admin POST.
func TestAdminSessionExpiresAndLogsOut(t *testing.T) {
	t.Parallel()
	var skew atomic.Int64
	b := setup(t, options{token: "tok", now: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }})
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	signIn := func() *http.Cookie {
		t.Helper()
		resp, err := noRedirect.PostForm(b.srv.URL+"/admin/login", url.Values{"token": {"tok"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
			t.Fatalf("login: %d %v", resp.StatusCode, resp.Cookies())
		}
		return resp.Cookies()[0]
	}
	get := func(c *http.Cookie) int {
		t.Helper()
		req, _ := http.NewRequest("GET", b.srv.URL+"/admin/events", nil)
		req.AddCookie(c)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	c := signIn()
	if c.MaxAge != 12*60*60 {
		t.Errorf("session cookie Max-Age %d, want 43200 (12h)", c.MaxAge)
	}
	if code := get(c); code != http.StatusOK {
		t.Fatalf("with the session: %d", code)
	}
	skew.Store(int64(11*time.Hour + 59*time.Minute))
	if code := get(c); code != http.StatusOK {
		t.Errorf("11h59m later: %d, want 200", code)
	}
	skew.Store(int64(12*time.Hour + time.Second))
	if code := get(c); code != http.StatusUnauthorized {
		t.Errorf("12h later: %d, want 401", code)
	}
	// A value whose expiry was moved is refused.
	exp, mac, _ := strings.Cut(c.Value, ".")
	if code := get(&http.Cookie{Name: c.Name, Value: exp + "9." + mac}); code != http.StatusUnauthorized {
		t.Errorf("extended cookie: %d, want 401", code)
	}
	skew.Store(0)

	c = signIn()
	logout := func(h http.Header) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", b.srv.URL+"/admin/logout", nil)
		req.AddCookie(c)
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := logout(http.Header{"Sec-Fetch-Site": {"cross-site"}, "Origin": {"https://evil.example"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site logout: %d, want 403", resp.StatusCode)
	}
	resp := logout(nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/admin/login" {
		t.Fatalf("logout: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if cs := resp.Cookies(); len(cs) != 1 || cs[0].Name != c.Name || cs[0].MaxAge >= 0 || cs[0].Value != "" {
		t.Errorf("logout cookies %+v, want the session cleared", cs)
	}
}

// TestAdminSessionCookieFlags: the session cookie is HttpOnly and
// SameSite=Strict, and Secure when webhookd itself serves TLS; a plain
// HTTP answer cannot mark it Secure (a proxy's X-Forwarded-Proto is not
// trusted) unless admin.secure_cookie says a TLS proxy serves it.
// Logging out clears it with the same flags.
func TestAdminSessionCookieFlags(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	tlsSrv := httptest.NewTLSServer(b.gw)
	t.Cleanup(tlsSrv.Close)
	proxied := setup(t, options{secureCookie: true})
	for _, tc := range []struct {
		name         string
		base         string
		client       *http.Client
		header       http.Header
		expectSecure bool
	}{
		{"TLS", tlsSrv.URL, tlsSrv.Client(), nil, true},
		{"plain HTTP", b.srv.URL, &http.Client{}, nil, false},
		{"plain HTTP claiming https", b.srv.URL, &http.Client{}, http.Header{"X-Forwarded-Proto": {"https"}}, false},
		{"plain HTTP behind a TLS proxy (secure_cookie)", proxied.srv.URL, &http.Client{}, nil, true},
	} {
		client := *tc.client
		client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		req, _ := http.NewRequest("POST", tc.base+"/admin/login", strings.NewReader(url.Values{"token": {testToken}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range tc.header {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
			t.Fatalf("%s: login %d %v", tc.name, resp.StatusCode, resp.Cookies())
		}
		c := resp.Cookies()[0]
		if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure != tc.expectSecure || c.Path != "/admin" || c.MaxAge <= 0 {
			t.Errorf("%s: session cookie %+v, want HttpOnly, SameSite=Strict, Secure=%v", tc.name, c, tc.expectSecure)
		}
		out, _ := http.NewRequest("POST", tc.base+"/admin/logout", nil)
		out.AddCookie(c)
		resp, err = client.Do(out)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if cs := resp.Cookies(); len(cs) != 1 || cs[0].MaxAge >= 0 || !cs[0].HttpOnly || cs[0].Secure != tc.expectSecure {
			t.Errorf("%s: logout cookie %+v", tc.name, cs)
		}
	}
}
