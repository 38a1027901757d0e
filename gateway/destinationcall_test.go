package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/pipelinetest"
)

// recorder is a destination that keeps every call's headers by key.
type recorder struct {
	*httptest.Server
	mu    sync.Mutex
	calls map[string][]http.Header
}

func newRecorder(t *testing.T) *recorder {
	r := &recorder{calls: map[string][]http.Header{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.calls[req.Header.Get("Idempotency-Key")] = append(r.calls[req.Header.Get("Idempotency-Key")], req.Header.Clone())
		r.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.Close)
	return r
}

// first waits for key's first call and returns its headers.
func (r *recorder) first(t *testing.T, key string) http.Header {
	t.Helper()
	var h http.Header
	pipelinetest.Eventually(t, 15*time.Second, "a call with key "+key, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		if c := r.calls[key]; len(c) > 0 {
			h = c[0]
			return true
		}
		return false
	})
	return h
}

// count returns how many calls key got.
func (r *recorder) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls[key])
}

// TestEventType: the type is read at ingest (the scheme's default or the
// source's event_type), stored in events.event_type, and sent as
// Webhookd-Event-Type; an event without one is stored with NULL and sent
// without the header; a type that cannot be stored as text is refused
// with a 400 and records nothing.
func TestEventType(t *testing.T) {
	t.Parallel()
	dest := newRecorder(t)
	p := pipelinetest.Start(t, pipelinetest.Options{Destinations: map[string]string{"billing": dest.URL}})
	storedType := func(id string) *string {
		var typ *string
		if err := p.Schema.Pool.QueryRow(context.Background(),
			`SELECT event_type FROM events WHERE source = 'stripe' AND external_id = $1`, id).Scan(&typ); err != nil {
			t.Fatalf("event %s: %v", id, err)
		}
		return typ
	}

	code, answer := p.Send(t, eventBody("evt_typed"))
	if code != http.StatusAccepted {
		t.Fatalf("typed event: %d %s", code, answer)
	}
	if typ := storedType("evt_typed"); typ == nil || *typ != "charge.succeeded" {
		t.Errorf("stored type = %v, want charge.succeeded", typ)
	}
	if got := dest.first(t, "stripe:billing:evt_typed").Get("Webhookd-Event-Type"); got != "charge.succeeded" {
		t.Errorf("Webhookd-Event-Type = %q, want charge.succeeded", got)
	}

	code, answer = p.Send(t, []byte(`{"id":"evt_untyped","data":{}}`))
	if code != http.StatusAccepted {
		t.Fatalf("untyped event: %d %s", code, answer)
	}
	if typ := storedType("evt_untyped"); typ != nil {
		t.Errorf("stored type = %q, want NULL", *typ)
	}
	if h := dest.first(t, "stripe:billing:evt_untyped"); h.Values("Webhookd-Event-Type") != nil {
		t.Errorf("untyped event sent with Webhookd-Event-Type %q", h.Get("Webhookd-Event-Type"))
	}

	for name, typ := range map[string]string{"control character": `bad\u0001type`, "too long": fmt.Sprintf("%0300d", 1)} {
		id := "evt_bad_type_" + name[:3]
		code, answer = p.Send(t, fmt.Appendf(nil, `{"id":%q,"type":"%s"}`, id, typ))
		if code != http.StatusBadRequest {
			t.Errorf("%s: got %d %s, want 400", name, code, answer)
		}
		if n := p.Schema.Int(t, `SELECT count(*) FROM events WHERE external_id = $1`, id); n != 0 {
			t.Errorf("%s: %d events recorded, want 0", name, n)
		}
	}
}
