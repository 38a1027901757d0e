package listen

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/webhookd/webhookd/gateway/admin"
)

func TestCheckForwardTo(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		givenURL    string
		givenRemote bool
		expectOK    bool
		expectErr   error
	}{
		{"http://localhost:3000/webhooks", false, true, nil},
		{"http://127.0.0.1:3000/hooks", false, true, nil},
		{"http://127.1.2.3/", false, true, nil},
		{"http://[::1]:8000/x", false, true, nil},
		{"https://app.localhost/x", false, true, nil},
		{"http://LOCALHOST./x", false, true, nil},
		{"http://example.com/hooks", false, false, ErrRemoteForward},
		{"http://10.0.0.5:3000/hooks", false, false, ErrRemoteForward},
		{"http://localhost.example.com/hooks", false, false, ErrRemoteForward},
		{"http://0.0.0.0:3000/hooks", false, false, ErrRemoteForward},
		{"http://example.com/hooks", true, true, nil},
		{"ftp://localhost/x", false, false, nil},
		{"localhost:3000", false, false, nil},
		{"http://user:pass@localhost/x", false, false, nil},
		{"", false, false, nil},
	} {
		_, err := checkForwardTo(c.givenURL, c.givenRemote)
		if (err == nil) != c.expectOK || (c.expectErr != nil && !errors.Is(err, c.expectErr)) {
			t.Errorf("checkForwardTo(%q, remote %v) = %v; want ok %v (%v)", c.givenURL, c.givenRemote, err, c.expectOK, c.expectErr)
		}
	}
}

// TestForwardedRequest: the call carries the raw body, the sender's
// headers but those of the hop and those the call sets itself (a sender
// cannot pass its own Webhookd-* or Idempotency-Key), and the key and
// Webhookd-* headers.
func TestForwardedRequest(t *testing.T) {
	t.Parallel()
	target, _ := url.Parse("http://localhost:3000/webhooks?app=1")
	f := &forwarder{target: target, now: time.Now}
	ev := admin.StreamEventJSON{
		Cursor: "10.1", Key: "github:listen:d-1", Source: "github", EventID: "d-1", EventType: "push",
		ContentType: "application/json", Payload: []byte(`{"ref":"main"}`),
		Headers: map[string][]string{
			"X-Github-Event": {"push"}, "User-Agent": {"GitHub-Hookshot/abc"}, "Content-Length": {"99"},
			"Webhookd-Source": {"evil"}, "Idempotency-Key": {"evil"}, "Connection": {"close"}, "Content-Type": {"text/plain"},
		},
	}
	req, err := f.request(context.Background(), ev, 3)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"X-Github-Event": "push", "User-Agent": "GitHub-Hookshot/abc", "Content-Type": "application/json",
		"Idempotency-Key": "github:listen:d-1", "Webhookd-Source": "github", "Webhookd-Event-Id": "d-1",
		"Webhookd-Event-Type": "push", "Webhookd-Attempt": "3", "Connection": "", "Content-Length": "",
	} {
		if got := req.Header.Get(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if len(req.Header.Values("Webhookd-Source")) != 1 || req.URL.String() != target.String() || req.ContentLength != int64(len(ev.Payload)) {
		t.Errorf("request %s %v (%d bytes)", req.URL, req.Header, req.ContentLength)
	}
}

func TestOutcomeSettled(t *testing.T) {
	t.Parallel()
	for code, want := range map[int]bool{
		0: false, 200: true, 204: true, 301: false, 400: true, 401: true, 404: true,
		408: false, 429: false, 500: false, 503: false,
	} {
		if got := (outcome{status: code, err: errors.New("x")}).settled(); got != want {
			t.Errorf("settled(%d) = %v, want %v", code, got, want)
		}
	}
	if (outcome{status: http.StatusOK}).String() != "HTTP 200" {
		t.Errorf("outcome string")
	}
}
