package gateway_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/testkit/logtest"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
)

// TestSenderGoneIsNotAnError: a sender that gives up while its event
// waits for a statement is not a server error: its request ends with one
// info line (499), no ERROR line; the event still commits with its batch.
func TestSenderGoneIsNotAnError(t *testing.T) {
	t.Parallel()
	logs := &logtest.Buffer{}
	p := pipelinetest.Start(t, pipelinetest.Options{NoWorker: true, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	ctx := t.Context()
	lock, err := p.Schema.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(context.Background())
	if _, err := lock.Exec(ctx, `LOCK TABLE events IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}

	body := eventBody("evt_sender_gone")
	h, _, err := verify.Sign(p.Verify, body, time.Now(), "")
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(short, http.MethodPost, p.URL+"/webhooks/stripe", bytes.NewReader(body))
	req.Header = h
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("answered %d while events were locked", resp.StatusCode)
	}
	pipelinetest.Eventually(t, 10*time.Second, "the request's end in the log", func() bool {
		s := logs.String()
		return strings.Contains(s, "client closed the request") || strings.Contains(s, `"level":"ERROR"`)
	})
	if err := lock.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for _, l := range logs.Lines(t) {
		if l["level"] == "ERROR" {
			t.Errorf("a sender that went away was logged as an error: %v", l)
		}
		if l["msg"] == "client closed the request before its answer" && l["status_code"] != float64(499) {
			t.Errorf("client closed line: %v", l)
		}
	}
	pipelinetest.Eventually(t, 10*time.Second, "the event's commit with its batch", func() bool {
		return p.Schema.Int(t, `SELECT count(*) FROM events WHERE external_id = 'evt_sender_gone'`) == 1
	})
}
