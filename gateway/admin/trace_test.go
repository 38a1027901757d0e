package admin_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
)

// TestEventDetailNamesItsTrace: an event recorded with tracing on shows
// its trace id in the API, the page and (through the API) the CLI, so an
// operator goes from an event to its trace; one recorded with tracing off
// shows none.
func TestEventDetailNamesItsTrace(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	b.send(t, "evt_traced")
	b.send(t, "evt_untraced")
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	if _, err := b.p.Schema.Pool.Exec(t.Context(), `UPDATE events SET trace_parent = $1 WHERE external_id = 'evt_traced'`,
		"00-"+traceID+"-00f067aa0ba902b7-01"); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"evt_traced": traceID, "evt_untraced": ""} {
		var d struct {
			TraceID *string `json:"trace_id"`
		}
		if code := b.do(t, http.MethodGet, "/admin/events/"+pipelinetest.Source+"/"+id, "", &d); code != http.StatusOK {
			t.Fatalf("%s: %d", id, code)
		}
		got := ""
		if d.TraceID != nil {
			got = *d.TraceID
		}
		if got != want {
			t.Errorf("%s: trace_id %q, want %q", id, got, want)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, b.srv.URL+"/admin/events/"+pipelinetest.Source+"/evt_traced", nil)
	req.Header.Set("Accept", "text/html")
	req.Header.Set("Authorization", "Bearer "+b.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	page := new(strings.Builder)
	if _, err := io.Copy(page, resp.Body); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), `id="trace-id">`+traceID+`<`) {
		t.Errorf("the event page does not show the trace id:\n%s", page)
	}
}
