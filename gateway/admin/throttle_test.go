package admin_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestWrongTokensThrottled: an address that presented 10 wrong tokens
// is answered 429 with Retry-After, whatever it presents next, bearer or
// login form, until a try comes back (one every 3s); a request that
// presents nothing is not counted; and the refusals are one log line a
// minute with their counts, not a line each (issue 23, I3). Before,
// guessing ran at the server's speed (~2,400/s), one WARN line each.
func TestWrongTokensThrottled(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		clock = time.Now()
	)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	b := setup(t, options{token: "right-token-0123456789", throttle: true, now: now})
	get := func(token string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, b.srv.URL+"/admin/events", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for i := range 10 {
		if code := get("wrong-token-guess").StatusCode; code != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d, want 401", i+1, code)
		}
	}
	resp := get("wrong-token-guess")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("the 11th wrong token: %d (Retry-After %q), want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if code := get("right-token-0123456789").StatusCode; code != http.StatusTooManyRequests {
		t.Errorf("the right token from a throttled address: %d, want 429 (its tokens are not looked at)", code)
	}
	login, err := http.PostForm(b.srv.URL+"/admin/login", url.Values{"token": {"another-guess"}})
	if err != nil {
		t.Fatal(err)
	}
	login.Body.Close()
	if login.StatusCode != http.StatusTooManyRequests {
		t.Errorf("the login form from a throttled address: %d, want 429", login.StatusCode)
	}
	if code := get("").StatusCode; code != http.StatusUnauthorized {
		t.Errorf("a request presenting no token: %d, want 401 (not counted, not throttled)", code)
	}
	for range 40 {
		get("wrong-token-guess")
	}
	refusedLines := func() (n int, last map[string]any) {
		for _, l := range b.logs.Lines(t) {
			if msg, _ := l["msg"].(string); strings.HasPrefix(msg, "admin request") || strings.HasPrefix(msg, "admin login") {
				n, last = n+1, l
			}
		}
		return n, last
	}
	if n, _ := refusedLines(); n != 1 {
		t.Errorf("%d log lines for 10 wrong tokens and 43 throttled requests within a minute, want 1", n)
	}

	advance(3 * time.Second) // one try back
	if code := get("right-token-0123456789").StatusCode; code != http.StatusOK {
		t.Errorf("the right token once a try came back: %d, want 200", code)
	}
	advance(time.Minute)
	get("wrong-token-guess")
	n, last := refusedLines()
	if n != 2 || last["wrong_tokens"] != float64(10) || last["throttled"] != float64(43) || last["no_token"] != float64(1) {
		t.Errorf("after a minute: %d lines, the last %v; want 2, the last counting the 9 wrong tokens after the first line and this one, 43 throttled and 1 without a token", n, last)
	}
}
