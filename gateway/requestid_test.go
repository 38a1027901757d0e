package gateway_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/internal/testkit/logtest"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
)

// TestRequestIDIsShortAndSafe: every request gets an id of our own, in
// the answer and the log lines as request_id; a client's X-Request-Id is
// logged beside it as client_request_id only when it is at most 128
// characters of [A-Za-z0-9._:-]. Any other (a megabyte, markup, a tab)
// is dropped from the log lines and the stored headers alike.
func TestRequestIDIsShortAndSafe(t *testing.T) {
	t.Parallel()
	logs := &logtest.Buffer{}
	p := pipelinetest.Start(t, pipelinetest.Options{
		NoWorker: true,
		Logger:   slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	for i, tc := range []struct {
		givenPath, givenID string
		expectKept         bool
	}{
		{"/webhooks/stripe", "req_1.2:3-abc", true},
		{"/webhooks/stripe", strings.Repeat("a", 128), true},
		{"/webhooks/stripe", strings.Repeat("a", 129), false},
		{"/webhooks/stripe", strings.Repeat("x", 10<<10), false},
		{"/webhooks/stripe", "<script>alert(1)</script>", false},
		{"/webhooks/stripe", "tab\there", false},
		// Under the server's 64 KiB header limit (past it, net/http answers 431).
		{"/healthz", strings.Repeat("h", 32<<10), false},
	} {
		body := eventBody("evt_rid_" + string(rune('a'+i)))
		req, _ := http.NewRequest(http.MethodPost, p.URL+tc.givenPath, bytes.NewReader(body))
		if tc.givenPath == "/healthz" {
			req, _ = http.NewRequest(http.MethodGet, p.URL+tc.givenPath, nil)
		}
		for k, v := range signed(body) {
			req.Header[k] = v
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Request-Id", tc.givenID)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got := resp.Header.Get("X-Request-Id")
		if resp.StatusCode >= 300 {
			t.Errorf("%.20q on %s: %d", tc.givenID, tc.givenPath, resp.StatusCode)
		}
		if got == tc.givenID || len(got) != 24 {
			t.Errorf("X-Request-Id %.20q: answered %.30q, want an id of our own", tc.givenID, got)
		}
		clientLogged := strings.Contains(logs.String(), `"client_request_id":"`+tc.givenID+`"`)
		if tc.givenPath != "/healthz" && tc.expectKept != clientLogged {
			t.Errorf("X-Request-Id %.20q (%d bytes): logged as client_request_id %v, want %v", tc.givenID, len(tc.givenID), clientLogged, tc.expectKept)
		}
		if !tc.expectKept && strings.Contains(logs.String(), tc.givenID) {
			t.Errorf("X-Request-Id %.20q was logged", tc.givenID)
		}
		if tc.givenPath != "/healthz" && !strings.Contains(logs.String(), `"request_id":"`+got+`"`) {
			t.Errorf("no log line carries the request id %q", got)
		}
	}
	if n := p.Schema.Int(t, `SELECT count(*) FROM events WHERE headers::text LIKE '%xxxxxxxxxx%' OR headers::text LIKE '%script%'`); n != 0 {
		t.Errorf("%d events stored a replaced X-Request-Id", n)
	}
}
