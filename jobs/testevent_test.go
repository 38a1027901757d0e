package jobs_test

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/webhookd/webhookd/jobs"
)

// TestTestSender: a test event is one call by the destination's own
// means (its auth, its signature) with a key of its own, marked
// Webhookd-Test: 1, carrying a webhookd.test body; a failed call is a
// result, an unknown destination an error.
func TestTestSender(t *testing.T) {
	t.Parallel()
	var (
		mu     sync.Mutex
		got    []*http.Request
		bodies [][]byte
		status = http.StatusOK
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got, bodies = append(got, r), append(bodies, body)
		code := status
		mu.Unlock()
		w.WriteHeader(code)
		_, _ = w.Write([]byte(`{"seen":true}`))
	}))
	t.Cleanup(srv.Close)
	dest := buildDestination(t, jobs.DestinationSpec{URL: srv.URL, SigningSecret: "whsec_c2VjcmV0", Auth: &jobs.AuthSpec{Bearer: "tok-secret-1"}})
	sender := jobs.NewTestSender(jobs.Routes{"src": {"dst": dest}}, nil, slog.New(slog.DiscardHandler))

	res, err := sender.Send(t.Context(), "src", "dst", "tester")
	if err != nil || !res.Delivered || res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Key, "src:dst:webhookd_test_") ||
		res.Key != "src:dst:"+res.EventID || !strings.Contains(string(res.Answer.Body), "seen") {
		t.Fatalf("test event: %+v, %v", res, err)
	}
	mu.Lock()
	r, body := got[0], bodies[0]
	mu.Unlock()
	var ev struct {
		ID, Type string
		Test     bool
		Source   string
	}
	if err := json.Unmarshal(body, &ev); err != nil || ev.ID != res.EventID || ev.Type != jobs.TestEventType || !ev.Test || ev.Source != "src" {
		t.Errorf("test event body %s: %v", body, err)
	}
	for name, want := range map[string]string{
		"Webhookd-Test": "1", "Idempotency-Key": res.Key, "Authorization": "Bearer tok-secret-1",
		"Webhookd-Event-Type": jobs.TestEventType, "Webhook-Id": res.Key, "Content-Type": "application/json",
	} {
		if v := r.Header.Get(name); v != want {
			t.Errorf("%s: %q, want %q", name, v, want)
		}
	}
	if !strings.HasPrefix(r.Header.Get("Webhook-Signature"), "v1,") {
		t.Errorf("the test call is not signed: %q", r.Header.Get("Webhook-Signature"))
	}

	// Each test event has its own key; a failure is a result.
	mu.Lock()
	status = http.StatusInternalServerError
	mu.Unlock()
	again, err := sender.Send(t.Context(), "src", "dst", "tester")
	if err != nil || again.Delivered || again.StatusCode != http.StatusInternalServerError || again.Key == res.Key || again.Error == "" {
		t.Errorf("failed test event: %+v, %v", again, err)
	}
	if _, err := sender.Send(t.Context(), "src", "nope", "tester"); !errors.Is(err, jobs.ErrUnknownDestination) {
		t.Errorf("unknown destination: %v", err)
	}
	if _, err := sender.Send(t.Context(), "nope", "dst", "tester"); !errors.Is(err, jobs.ErrUnknownSource) {
		t.Errorf("unknown source: %v", err)
	}
}
