package admin_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
)

// TestAdminClientGoneIsNotAnError: an operator whose listing is cut
// short (the browser tab closed while Postgres waited) ends the request
// with one info line, not a 500 and an ERROR line.
func TestAdminClientGoneIsNotAnError(t *testing.T) {
	t.Parallel()
	b := setup(t, options{token: "tok"})
	ctx := t.Context()
	lock, err := b.p.Schema.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(context.Background())
	if _, err := lock.Exec(ctx, `LOCK TABLE events IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(short, "GET", b.srv.URL+"/admin/events", nil)
	req.Header.Set("Authorization", "Bearer tok")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("answered %d while events were locked", resp.StatusCode)
	}
	pipelinetest.Eventually(t, 10*time.Second, "the request's end in the log", func() bool {
		s := b.logs.String()
		return strings.Contains(s, "client closed the request") || strings.Contains(s, `"level":"ERROR"`)
	})
	if s := b.logs.String(); strings.Contains(s, `"level":"ERROR"`) {
		t.Errorf("a client that went away was logged as an error:\n%s", s)
	}
}
