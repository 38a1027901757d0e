package admin_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestDestinationsAPI: the list shows each destination's state and
// limits; pause and resume change it, record who and why, refuse a body
// that is not JSON (415, never taken as empty) and an unknown destination
// (404).
func TestDestinationsAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, options{token: "tok"})
	type dest struct {
		Source, Destination, State string
		PausedBy                   string `json:"paused_by"`
		PauseReason                string `json:"pause_reason"`
		CircuitFailures            int    `json:"circuit_failures"`
	}
	var list struct{ Destinations []dest }
	if code := b.do(t, http.MethodGet, "/admin/destinations", "", &list); code != http.StatusOK || len(list.Destinations) != 1 {
		t.Fatalf("list: %d %+v", code, list)
	}
	if d := list.Destinations[0]; d.Source != "stripe" || d.Destination != destName || d.State != "active" || d.CircuitFailures != 20 {
		t.Fatalf("destination %+v, want stripe/%s active with the default circuit", d, destName)
	}
	var got dest
	path := "/admin/destinations/stripe/" + destName
	if code := b.do(t, http.MethodPost, path+"/pause", `{"by":"alice","reason":"owner's incident"}`, &got); code != http.StatusOK ||
		got.State != "paused" || got.PausedBy != "alice" || got.PauseReason != "owner's incident" {
		t.Fatalf("pause: %d %+v", code, got)
	}
	if code := b.do(t, http.MethodGet, "/admin/destinations", "", &list); code != http.StatusOK || list.Destinations[0].State != "paused" {
		t.Fatalf("list after the pause: %d %+v", code, list)
	}
	// The page: the state a pill of its own colour (paused is not the
	// grey of active), the URL, durations as written.
	_, page := callWith(t, b.srv.URL, request{method: http.MethodGet, path: "/admin/view/destinations"}, http.Header{"Authorization": {"Bearer tok"}})
	for _, want := range []string{`<span class="state dest-paused">paused</span>`, "<code>" + b.p.Routes["stripe"][destName].URL + "</code>", "circuit after 20 failures, 1m<"} {
		if !strings.Contains(page, want) {
			t.Errorf("the destinations page does not show %s:\n%s", want, page)
		}
	}
	var resumed dest
	if code := b.do(t, http.MethodPost, path+"/resume", "", &resumed); code != http.StatusOK || resumed.State != "active" || resumed.PausedBy != "" {
		t.Fatalf("resume: %d %+v", code, resumed)
	}

	// A form body is not JSON: 415, and nothing is paused.
	req, _ := http.NewRequest(http.MethodPost, b.srv.URL+path+"/pause", strings.NewReader("by=mallory"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("form body: %d, want 415", resp.StatusCode)
	}
	if b.do(t, http.MethodGet, "/admin/destinations", "", &list); list.Destinations[0].State != "active" {
		t.Fatalf("a refused request paused the destination: %+v", list)
	}
	if code := b.do(t, http.MethodPost, "/admin/destinations/stripe/nope/pause", "", nil); code != http.StatusNotFound {
		t.Fatalf("unknown destination: %d, want 404", code)
	}
	if code := b.do(t, http.MethodPost, path+"/pause", `{"by":"a\u0000b"}`, nil); code != http.StatusBadRequest {
		t.Fatalf("NUL in by: %d, want 400", code)
	}
}
