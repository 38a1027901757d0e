package admin_test

import (
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/dedupe"
)

// TestAdminRefusesUnstorableText: a NUL or invalid UTF-8 in an admin
// filter, path parameter, cursor or replay note is answered 400 (never
// 500, never an ERROR log line), and changes nothing.
func TestAdminRefusesUnstorableText(t *testing.T) {
	t.Parallel()
	b := setup(t, options{token: "tok"})
	b.send(t, "evt_ok")
	b.waitState(t, "evt_ok", dedupe.StatusDone)
	badCursor := base64.RawURLEncoding.EncodeToString([]byte("2026-01-01T00:00:00Z\nstripe\n\xff"))
	nulCursor := base64.RawURLEncoding.EncodeToString([]byte("2026-01-01T00:00:00Z\nstri\x00pe\nevt"))
	runs := b.p.Schema.Int(t, `SELECT count(*) FROM job_runs`)
	for _, tc := range []struct {
		method, path, contentType, body string
	}{
		{"GET", "/admin/events?source=%00", "", ""},
		{"GET", "/admin/events?source=%FF", "", ""},
		{"GET", "/admin/events?cursor=" + badCursor, "", ""},
		{"GET", "/admin/events?cursor=" + nulCursor, "", ""},
		{"GET", "/admin/events?cursor=%00", "", ""},
		{"GET", "/admin/events/stripe/evt%00x", "", ""},
		{"GET", "/admin/events/stripe/evt%FFx", "", ""},
		{"GET", "/admin/events/%FF/evt_ok", "", ""},
		{"GET", "/admin/view/stripe/evt%00x", "", ""},
		{"GET", "/admin/view/stripe/evt%C3x", "", ""},
		{"GET", "/admin/?source=%00", "", ""},
		{"POST", "/admin/events/stripe/evt_ok/replay?force=true&destination=billing&reason=a%00b", "", ""},
		{"POST", "/admin/events/stripe/evt_ok/replay?by=%FF", "", ""},
		{"POST", "/admin/events/stripe/evt_ok/replay?destination=%00", "", ""},
		{"POST", "/admin/replay", "application/json", `{"source":"stripe","reason":"a\u0000b","dry_run":false,"force":true}`},
		{"POST", "/admin/replay", "application/json", `{"cursor":"\u0000"}`},
		{"POST", "/admin/replay", "application/json", `{"source":"\u0000"}`},
		{"POST", "/admin/view/stripe/evt_ok/replay", "application/x-www-form-urlencoded", "force=true&by=me&reason=a%00b"},
	} {
		req, _ := http.NewRequest(tc.method, b.srv.URL+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer tok")
		if tc.contentType != "" {
			req.Header.Set("Content-Type", tc.contentType)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s %s %s: %d %.200s, want 400", tc.method, tc.path, tc.body, resp.StatusCode, answer)
		}
	}
	if got := b.p.Schema.Int(t, `SELECT count(*) FROM job_runs`); got != runs {
		t.Errorf("job_runs went from %d to %d rows", runs, got)
	}
	if strings.Contains(b.logs.String(), `"level":"ERROR"`) {
		t.Errorf("refused input logged as an error:\n%s", b.logs.String())
	}
}

// TestAdminAnswers503WhenTheDatabaseIsTooSlow: a listing that cannot
// finish within the admin statement timeout answers 503, not 500 after
// however long the lock lasts.
func TestAdminAnswers503WhenTheDatabaseIsTooSlow(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := t.Context()
	tx, err := b.p.Schema.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `LOCK TABLE events IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	var answer map[string]string
	if code := b.do(t, "GET", "/admin/events", "", &answer); code != http.StatusServiceUnavailable || !strings.Contains(answer["error"], "did not answer in time") {
		t.Fatalf("listing under a lock: %d %v, want 503", code, answer)
	}
}
