package jobs_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/testkit/pgtest"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/internal/testkit/redistest"
	"github.com/webhookd/webhookd/internal/tracing"
	"github.com/webhookd/webhookd/jobs"
)

// traced is an in-memory exporter behind a synchronous provider, and the
// span standing for an event's ingest request.
type traced struct {
	exp     *tracetest.InMemoryExporter
	tp      *sdktrace.TracerProvider
	ingest  trace.SpanContext
	ingestT string // its traceparent
}

func newTraced(t *testing.T) *traced {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("test").Start(context.Background(), "POST /webhooks/:source", trace.WithSpanKind(trace.SpanKindServer))
	span.End()
	return &traced{exp: exp, tp: tp, ingest: span.SpanContext(), ingestT: tracing.TraceParent(ctx)}
}

// named returns the ended spans called name, in the order they ended.
func (tr *traced) named(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range tr.exp.GetSpans().Snapshots() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func attr(s sdktrace.ReadOnlySpan, key string) attribute.Value {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// TestDeliverJoinsEventTrace: a claimed run's work is one "deliver" span
// with its "claim" and the destination call ("POST", a client span) in
// the trace whose traceparent was stored with the event; the destination
// gets the call span's traceparent; the retry (call 2) and a forced
// replay (generation 2) join the trace linked to the request span, the
// first call is not linked.
func TestDeliverJoinsEventTrace(t *testing.T) {
	t.Parallel()
	tr := newTraced(t)
	d := newDestination(t, func(n int, _ *http.Request, w http.ResponseWriter) {
		if n == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	s := pgtest.New(t)
	store := dedupe.New(s.Pool)
	routes := jobs.Routes{"src": {"dst": buildDestination(t, jobs.DestinationSpec{Name: "dst", URL: d.URL})}}
	h := jobs.NewHandler(store, jobs.HandlerConfig{
		Routes: routes, Lease: time.Minute, Logger: testLogger(t), TracerProvider: tr.tp,
		Backoff: jobs.Backoff{Base: 10 * time.Millisecond, Max: 40 * time.Millisecond},
	})
	ev := dedupe.Event{Source: "src", ExternalID: "evt_1", ContentType: "application/json", Payload: []byte(body), TraceParent: tr.ingestT}
	if _, err := dedupe.RecordBatch(testCtx(t), s.Pool, []dedupe.Event{ev}); err != nil {
		t.Fatal(err)
	}
	first := jobs.DeliverPayload{Source: "src", EventID: "evt_1", Destination: "dst"}
	if err := h.Deliver(testCtx(t), first); err == nil {
		t.Fatal("the 500 was not a retry")
	}
	if err := h.Deliver(testCtx(t), first); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	if err := h.Deliver(testCtx(t), jobs.DeliverPayload{Source: "src", EventID: "evt_1", Destination: "dst", Generation: 2}); err != nil {
		t.Fatalf("the replay: %v", err)
	}

	delivers, claims, posts := tr.named("webhookd.deliver"), tr.named("webhookd.claim"), tr.named("POST")
	if len(delivers) != 3 || len(claims) != 3 || len(posts) != 3 {
		t.Fatalf("%d deliver, %d claim, %d POST spans; want 3 of each", len(delivers), len(claims), len(posts))
	}
	calls := d.Calls()
	wantLinks := []string{"", "retry", "replay"}
	for i, dl := range delivers {
		if dl.SpanContext().TraceID() != tr.ingest.TraceID() || dl.Parent().SpanID() != tr.ingest.SpanID() {
			t.Errorf("deliver %d: trace %s parent %s, want the event's trace %s under its request span %s",
				i, dl.SpanContext().TraceID(), dl.Parent().SpanID(), tr.ingest.TraceID(), tr.ingest.SpanID())
		}
		if dl.SpanKind() != trace.SpanKindConsumer {
			t.Errorf("deliver %d is a %s span, want consumer", i, dl.SpanKind())
		}
		if got := attr(dl, tracing.AttemptKey).AsInt64(); got != int64([]int{1, 2, 1}[i]) {
			t.Errorf("deliver %d: attempt %d", i, got)
		}
		links := dl.Links()
		switch {
		case wantLinks[i] == "" && len(links) != 0:
			t.Errorf("deliver %d (first call) has %d links, want none", i, len(links))
		case wantLinks[i] != "" && (len(links) != 1 || links[0].SpanContext.SpanID() != tr.ingest.SpanID() ||
			len(links[0].Attributes) != 1 || links[0].Attributes[0].Value.AsString() != wantLinks[i]):
			t.Errorf("deliver %d: links %+v, want one to the request span saying %q", i, links, wantLinks[i])
		}
		if claims[i].Parent().SpanID() != dl.SpanContext().SpanID() {
			t.Errorf("claim %d is not a child of its deliver span", i)
		}
		post := posts[i]
		if post.Parent().SpanID() != dl.SpanContext().SpanID() || post.SpanKind() != trace.SpanKindClient {
			t.Errorf("POST %d: parent %s kind %s, want a client span under its deliver span", i, post.Parent().SpanID(), post.SpanKind())
		}
		if got := attr(post, "http.response.status_code").AsInt64(); got != int64([]int{500, 200, 200}[i]) {
			t.Errorf("POST %d: status %d", i, got)
		}
		got := tracing.SpanContext(calls[i].Header.Get("Traceparent"))
		if got.TraceID() != tr.ingest.TraceID() || got.SpanID() != post.SpanContext().SpanID() {
			t.Errorf("call %d: destination got traceparent %q, want the POST span %s of trace %s",
				i, calls[i].Header.Get("Traceparent"), post.SpanContext().SpanID(), tr.ingest.TraceID())
		}
	}
}

// TestDeliverUntracedSendsNoTraceparent: with tracing off (no provider)
// the destination gets no traceparent, even for an event stored with one.
func TestDeliverUntracedSendsNoTraceparent(t *testing.T) {
	t.Parallel()
	tr := newTraced(t)
	b := setup(t, handlerOptions{dest: jobs.DestinationSpec{Name: "dst"}})
	d := newDestination(t, status(200))
	b.routes["src"]["dst"] = buildDestination(t, jobs.DestinationSpec{Name: "dst", URL: d.URL})
	ev := dedupe.Event{Source: "src", ExternalID: "evt_1", Payload: []byte(body), TraceParent: tr.ingestT}
	if _, err := dedupe.RecordBatch(testCtx(t), b.schema.Pool, []dedupe.Event{ev}); err != nil {
		t.Fatal(err)
	}
	if err := b.handler.Deliver(testCtx(t), jobs.DeliverPayload{Source: "src", EventID: "evt_1", Destination: "dst"}); err != nil {
		t.Fatal(err)
	}
	calls := d.Calls()
	if len(calls) != 1 || calls[0].Header.Get("Traceparent") != "" {
		t.Fatalf("calls %d, traceparent %q; want one call without", len(calls), calls[0].Header.Get("Traceparent"))
	}
}

// TestRelayHandOffSpan: each event the relay hands off gets a producer
// span in the trace of the request that notified it; an event notified
// without a span gets none.
func TestRelayHandOffSpan(t *testing.T) {
	t.Parallel()
	tr := newTraced(t)
	r := redistest.New(t)
	routes := jobs.Routes{"src": {"dst": buildDestination(t, jobs.DestinationSpec{Name: "dst"})}}
	relay := jobs.NewRelay(jobs.NewEnqueuer(r.Client, r.Queue, routes), nil, jobs.RelayConfig{Linger: time.Millisecond, Logger: testLogger(t), TracerProvider: tr.tp})
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan struct{})
	go func() { defer close(done); relay.Run(ctx) }()
	relay.Notify(trace.ContextWithSpanContext(context.Background(), tr.ingest), dedupe.EventRef{Source: "src", ExternalID: "evt_1"})
	relay.Notify(context.Background(), dedupe.EventRef{Source: "src", ExternalID: "evt_2"})
	pipelinetest.Eventually(t, 10*time.Second, "both events enqueued", func() bool {
		return r.Client.LLen(testCtx(t), "asynq:{"+r.Queue+"}:pending").Val() == 2
	})
	cancel()
	<-done
	spans := tr.named("webhookd.handoff")
	if len(spans) != 1 {
		t.Fatalf("%d hand-off spans, want 1 (for the traced event)", len(spans))
	}
	s := spans[0]
	if s.Parent().SpanID() != tr.ingest.SpanID() || s.SpanContext().TraceID() != tr.ingest.TraceID() || s.SpanKind() != trace.SpanKindProducer {
		t.Fatalf("hand-off span: parent %s trace %s kind %s; want a producer under the request span", s.Parent().SpanID(), s.SpanContext().TraceID(), s.SpanKind())
	}
	if got := attr(s, tracing.EventIDKey).AsString(); got != "evt_1" {
		t.Fatalf("hand-off span names event %q", got)
	}
}

// TestRecoveryJoinsEventTrace: what the reconciler does about an event's
// work shows in the event's trace: a task written for an event the
// relay never handed off, and a run whose lease passed (its worker died,
// its own spans lost with it), each a "webhookd.recover" span under the
// request span.
func TestRecoveryJoinsEventTrace(t *testing.T) {
	t.Parallel()
	tr := newTraced(t)
	s := pgtest.New(t)
	store := dedupe.New(s.Pool)
	r := redistest.New(t)
	routes := jobs.Routes{"src": {"dst": buildDestination(t, jobs.DestinationSpec{Name: "dst"})}}
	rec := jobs.NewReconciler(store, jobs.NewEnqueuer(r.Client, r.Queue, routes), jobs.ReconcilerConfig{
		MinAge: time.Millisecond, Slack: time.Millisecond, Logger: testLogger(t), TracerProvider: tr.tp,
	})
	var events []dedupe.Event
	for _, id := range []string{"evt_unsent", "evt_abandoned"} {
		events = append(events, dedupe.Event{Source: "src", ExternalID: id, Payload: []byte(body), TraceParent: tr.ingestT})
	}
	if _, err := dedupe.RecordBatch(testCtx(t), s.Pool, events); err != nil {
		t.Fatal(err)
	}
	// A worker claimed evt_abandoned and died: its lease passes.
	if _, err := store.Claim(testCtx(t), dedupe.ClaimRequest{Key: jobs.Key("src", "dst", "evt_abandoned", 1), Source: "src",
		ExternalID: "evt_abandoned", Destination: "dst", Generation: 1, MaxAttempts: 5, Lease: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if _, err := rec.Pass(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, sp := range tr.named("webhookd.recover") {
		if sp.Parent().SpanID() != tr.ingest.SpanID() || sp.SpanContext().TraceID() != tr.ingest.TraceID() {
			t.Errorf("recover span of %s is not under the request span", attr(sp, tracing.EventIDKey).AsString())
		}
		id := attr(sp, tracing.EventIDKey).AsString()
		got[id] = append(got[id], attr(sp, tracing.RecoveryKey).AsString()+"/"+attr(sp, tracing.OutcomeKey).AsString())
	}
	want := map[string][]string{
		"evt_unsent":    {"event not claimed/handed_off"},
		"evt_abandoned": {"lease passed/failed", "lease passed/written"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("recover spans %v, want %v", got, want)
	}
}
