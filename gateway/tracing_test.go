package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway"
	"github.com/webhookd/webhookd/gateway/eventid"
	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/testkit/pgtest"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/internal/tracing"
)

// senderTraceParent is a traceparent a sender might send.
const senderTraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// TestIngestTrace: with tracing on, a webhook's request is a server span
// that continues the sender's traceparent, its record a child span, the
// hand-off gets the request's span, and the new event stores the request
// span's traceparent (a repeat keeps the first one). With tracing off
// nothing is stored.
func TestIngestTrace(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	s := pgtest.New(t)
	batcher := dedupe.NewBatcher(s.Pool, dedupe.BatcherConfig{})
	t.Cleanup(batcher.Close)
	v, _ := verify.New(verify.Config{Scheme: "stripe", Secrets: []string{pipelinetest.Secret}})
	id, _ := eventid.Parse("json:id")
	var (
		mu       sync.Mutex
		notified []trace.SpanContext
	)
	newServer := func(tp trace.TracerProvider) *gateway.Server {
		return gateway.New(gateway.Config{
			Sources:        map[string]gateway.Source{"stripe": {Scheme: "stripe", Verifier: v, EventID: id}},
			Registry:       prometheus.NewRegistry(),
			TracerProvider: tp,
		}, batcher, handoffFunc(func(ctx context.Context) {
			mu.Lock()
			defer mu.Unlock()
			notified = append(notified, trace.SpanContextFromContext(ctx))
		}))
	}
	traced, untraced := newServer(tp), newServer(nil)
	send := func(srv *gateway.Server, evt, traceParent string) int {
		body := eventBody(evt)
		req := httptest.NewRequest(http.MethodPost, "/webhooks/stripe", strings.NewReader(string(body)))
		for k, v := range signed(body) {
			req.Header[k] = v
		}
		if traceParent != "" {
			req.Header.Set("traceparent", traceParent)
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		return rec.Code
	}
	stored := func(evt string) string {
		var tp *string
		if err := s.Pool.QueryRow(context.Background(), `SELECT trace_parent FROM events WHERE external_id = $1`, evt).Scan(&tp); err != nil {
			t.Fatal(err)
		}
		if tp == nil {
			return ""
		}
		return *tp
	}

	if code := send(traced, "evt_traced", senderTraceParent); code != http.StatusAccepted {
		t.Fatalf("got %d", code)
	}
	sender := tracing.SpanContext(senderTraceParent)
	var server, record sdktrace.ReadOnlySpan
	for _, sp := range exp.GetSpans().Snapshots() {
		switch sp.Name() {
		case "POST /webhooks/:source":
			server = sp
		case "webhookd.record":
			record = sp
		}
	}
	if server == nil || record == nil {
		t.Fatalf("spans %v: want the request's and its record's", exp.GetSpans().Snapshots())
	}
	if server.SpanKind() != trace.SpanKindServer || server.SpanContext().TraceID() != sender.TraceID() || server.Parent().SpanID() != sender.SpanID() {
		t.Fatalf("request span: kind %s trace %s parent %s; want a server span continuing the sender's trace", server.SpanKind(), server.SpanContext().TraceID(), server.Parent().SpanID())
	}
	attrs := map[string]string{}
	for _, kv := range server.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	if attrs["http.response.status_code"] != "202" || attrs[tracing.EventIDKey] != "evt_traced" || attrs[tracing.SourceKey] != "stripe" {
		t.Fatalf("request span attributes %v", attrs)
	}
	if record.Parent().SpanID() != server.SpanContext().SpanID() {
		t.Fatalf("record span's parent %s, want the request span %s", record.Parent().SpanID(), server.SpanContext().SpanID())
	}
	got := tracing.SpanContext(stored("evt_traced"))
	if got.TraceID() != sender.TraceID() || got.SpanID() != server.SpanContext().SpanID() {
		t.Fatalf("stored traceparent %q, want the request span's", stored("evt_traced"))
	}
	mu.Lock()
	if len(notified) != 1 || notified[0].SpanID() != server.SpanContext().SpanID() {
		t.Fatalf("hand-off got span contexts %v, want the request span", notified)
	}
	mu.Unlock()

	// A repeat is its own request span; the event keeps its trace.
	if code := send(traced, "evt_traced", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"); code != http.StatusOK {
		t.Fatalf("repeat: got %d", code)
	}
	if again := tracing.SpanContext(stored("evt_traced")); again.SpanID() != server.SpanContext().SpanID() {
		t.Fatalf("a repeat changed the stored traceparent to %q", stored("evt_traced"))
	}

	// Without a sender's traceparent the request starts the trace.
	if code := send(traced, "evt_root", ""); code != http.StatusAccepted {
		t.Fatalf("got %d", code)
	}
	if root := tracing.SpanContext(stored("evt_root")); !root.IsValid() || root.TraceID() == sender.TraceID() {
		t.Fatalf("stored traceparent %q, want a trace of its own", stored("evt_root"))
	}

	// Tracing off: no traceparent stored, even when the sender sent one.
	if code := send(untraced, "evt_untraced", senderTraceParent); code != http.StatusAccepted {
		t.Fatalf("got %d", code)
	}
	if tp := stored("evt_untraced"); tp != "" {
		t.Fatalf("tracing off stored traceparent %q", tp)
	}
}

type handoffFunc func(ctx context.Context)

func (f handoffFunc) Notify(ctx context.Context, _ dedupe.EventRef) { f(ctx) }
