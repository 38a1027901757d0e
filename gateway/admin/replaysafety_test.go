package admin_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/jobs"
)

// TestForcedReplayNamesItsDestinationsAndReason: a forced replay that
// names no destination, or gives no reason, is refused with 400 and
// records nothing, by id and in bulk; naming one destination or "*"
// makes the new generation.
func TestForcedReplayNamesItsDestinationsAndReason(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	key := b.send(t, "evt_fx")
	b.waitState(t, "evt_fx", dedupe.StatusDone)
	runs := b.p.Schema.Int(t, `SELECT count(*) FROM job_runs`)
	for _, tc := range []struct{ path, body string }{
		{"/admin/events/stripe/evt_fx/replay?force=true&reason=why", ""},
		{"/admin/events/stripe/evt_fx/replay", `{"force":true,"reason":"why"}`},
		{"/admin/events/stripe/evt_fx/replay", `{"force":true,"destination":"billing"}`},
		{"/admin/events/stripe/evt_fx/replay?force=true&destination=*&reason=+", ""},
		{"/admin/replay", `{"source":"stripe","force":true,"dry_run":false,"reason":"why"}`},
		{"/admin/replay", `{"source":"stripe","force":true,"dry_run":false,"destination":"*"}`},
	} {
		var answer map[string]any
		if code := b.do(t, "POST", tc.path, tc.body, &answer); code != http.StatusBadRequest || answer["error"] == nil {
			t.Errorf("POST %s %s: %d %v, want 400 with an error", tc.path, tc.body, code, answer)
		}
	}
	stays(t, 300*time.Millisecond, "destination calls", func() bool { return b.dest.total() == 1 })
	if got := b.p.Schema.Int(t, `SELECT count(*) FROM job_runs`); got != runs {
		t.Fatalf("refused forced replays recorded runs: %d, was %d", got, runs)
	}
	var res jobs.ReplayResult
	if code := b.do(t, "POST", "/admin/events/stripe/evt_fx/replay", `{"force":true,"destination":"*","reason":"resend"}`, &res); code != http.StatusAccepted ||
		len(res.Runs) != 1 || res.Runs[0].Key != key+"#2" {
		t.Fatalf("forced replay to all destinations: %d %+v", code, res)
	}
}

// TestAdminJSONEndpointsRefuseOtherBodies: the API's POSTs answer 415 to a
// body that is not JSON (curl -d without a content type sends a form),
// never read it as an empty request: a bulk replay so sent acts on
// nothing.
func TestAdminJSONEndpointsRefuseOtherBodies(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	b.send(t, "evt_j")
	b.waitState(t, "evt_j", dedupe.StatusDone)
	for _, path := range []string{"/admin/replay", "/admin/events/stripe/evt_j/replay", "/admin/destinations/stripe/billing/pause"} {
		for _, ct := range []string{"application/x-www-form-urlencoded", "text/plain", ""} {
			req, _ := http.NewRequest("POST", b.srv.URL+path, strings.NewReader(`{"source":"stripe","dry_run":false}`))
			req.Header.Set("Authorization", "Bearer "+b.token)
			if ct != "" {
				req.Header.Set("Content-Type", ct)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnsupportedMediaType || !strings.Contains(string(body), "JSON") {
				t.Errorf("POST %s with Content-Type %q: %d %s, want 415", path, ct, resp.StatusCode, body)
			}
		}
	}
	if n := b.p.Schema.Int(t, `SELECT count(*) FROM destination_pauses`); n != 0 {
		t.Errorf("a refused pause paused: %d rows", n)
	}
}
