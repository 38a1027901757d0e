package admin_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestFilterTimesBefore1970Refused: since or until before 1970 is a 400
// (issue 23, I5). Before, until=0001-01-01 parsed as the zero time,
// which means no bound: the listing held every event instead of none.
func TestFilterTimesBefore1970Refused(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	b.send(t, "evt_1")
	for _, q := range []string{"until=0001-01-01", "since=0001-01-01T00:00:00Z", "until=1969-12-31", "since=1000000h"} {
		if code := b.do(t, http.MethodGet, "/admin/events?"+q, "", nil); code != http.StatusBadRequest {
			t.Errorf("GET /admin/events?%s: %d, want 400", q, code)
		}
	}
	var page struct {
		Events []struct {
			EventID string `json:"event_id"`
		} `json:"events"`
	}
	if code := b.do(t, http.MethodGet, "/admin/events?until=1970-01-02", "", &page); code != http.StatusOK || len(page.Events) != 0 {
		t.Errorf("until=1970-01-02: %d with %d events, want 200 and none", code, len(page.Events))
	}
}

// TestAssetsAreNotListed: /admin/assets/ answers its files without a
// token but lists no directory (issue 23, I5; before, GET /admin/assets/
// listed them).
func TestAssetsAreNotListed(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	get := func(path string) (int, string) {
		resp, err := http.Get(b.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, path := range []string{"/admin/assets/", "/admin/assets/."} {
		if code, body := get(path); code != http.StatusNotFound || strings.Contains(body, "admin.css") {
			t.Errorf("GET %s without a token: %d %q, want 404 and no listing", path, code, body)
		}
	}
	if code, _ := get("/admin/assets/admin.css"); code != http.StatusOK {
		t.Errorf("GET /admin/assets/admin.css: %d, want 200", code)
	}
}
