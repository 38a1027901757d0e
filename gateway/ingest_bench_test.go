package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway"
	"github.com/webhookd/webhookd/gateway/eventid"
	"github.com/webhookd/webhookd/gateway/verify"
)

// benchRecorder answers every Record at once, as if Postgres took no time:
// what is left is the gateway's own cost per request.
type benchRecorder struct{ rec dedupe.Recorded }

func (r benchRecorder) Record(context.Context, dedupe.Event) (dedupe.Recorded, error) {
	return r.rec, nil
}

type benchHandoff struct{}

func (benchHandoff) Notify(context.Context, dedupe.EventRef) {}

// benchBody is a reusable request body.
type benchBody struct{ bytes.Reader }

func (*benchBody) Close() error { return nil }

// benchWriter is a ResponseWriter that keeps only the status.
type benchWriter struct {
	h    http.Header
	code int
}

func (w *benchWriter) Header() http.Header         { return w.h }
func (w *benchWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *benchWriter) WriteHeader(code int)        { w.code = code }

// BenchmarkIngest runs POST /webhooks/:source through Echo's ServeHTTP
// (middleware, routing, body read, Stripe verification, event id
// extraction, header encoding, logging to a discarding JSON handler,
// metrics, the JSON answer) with a recorder that answers at once. It
// shows the gateway's CPU and allocations per request apart from
// Postgres. The request and response objects are reused, so their
// allocations do not count.
func BenchmarkIngest(b *testing.B) {
	now := time.Unix(1_700_000_000, 0)
	cfg := verify.Config{Scheme: verify.SchemeStripe, Secrets: []string{"whsec_bench"}}
	v, err := verify.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ex, err := eventid.Parse("json:id")
	if err != nil {
		b.Fatal(err)
	}
	// traced exports to nowhere through the SDK's batch processor, as a
	// deployment with OTEL_* set does: what tracing costs per request.
	traced := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() { _ = traced.Shutdown(context.Background()) })
	for _, tc := range []struct {
		name   string
		rec    dedupe.Recorded
		size   int
		tracer trace.TracerProvider
	}{
		{"new/1KiB", dedupe.Recorded{Inserted: true, Deliveries: 1, Pending: true}, 1 << 10, nil},
		{"duplicate/1KiB", dedupe.Recorded{Deliveries: 2, State: dedupe.StatusDone}, 1 << 10, nil},
		{"new/64KiB", dedupe.Recorded{Inserted: true, Deliveries: 1, Pending: true}, 64 << 10, nil},
		{"new/1KiB/traced", dedupe.Recorded{Inserted: true, Deliveries: 1, Pending: true}, 1 << 10, traced},
	} {
		b.Run(tc.name, func(b *testing.B) {
			srv := gateway.New(gateway.Config{
				Sources: map[string]gateway.Source{"stripe": {Scheme: verify.SchemeStripe,
					Verifier: v, EventID: ex, PlanFunc: func(string) []string { return []string{"sink"} }}},
				Logger:         slog.New(slog.NewJSONHandler(io.Discard, nil)),
				Now:            func() time.Time { return now },
				TracerProvider: tc.tracer,
			}, benchRecorder{tc.rec}, benchHandoff{})

			prefix := []byte(`{"id":"evt_bench_1","object":"event","type":"charge.succeeded","data":{"object":{"pad":"`)
			body := append(prefix, bytes.Repeat([]byte("x"), tc.size-len(prefix)-4)...)
			body = append(body, `"}}}`...)
			header, _, err := verify.Sign(cfg, body, now, "")
			if err != nil {
				b.Fatal(err)
			}
			header.Set("Content-Type", "application/json")
			header.Set("User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)")
			req, err := http.NewRequest(http.MethodPost, "http://gateway/webhooks/stripe", nil)
			if err != nil {
				b.Fatal(err)
			}
			rb := &benchBody{}
			req.Body = rb
			req.Header = header // the handler only reads it
			req.ContentLength = int64(len(body))
			w := &benchWriter{h: http.Header{}}
			want := http.StatusAccepted
			if !tc.rec.Inserted {
				want = http.StatusOK
			}

			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				rb.Reset(body)
				clear(w.h)
				w.code = 0
				srv.ServeHTTP(w, req)
				if w.code != want {
					b.Fatalf("status %d, want %d", w.code, want)
				}
			}
		})
	}
}

// BenchmarkIngestParallel is BenchmarkIngest's new event with requests
// on every core at once, for CPU per request under contention (metrics,
// pools, logging).
func BenchmarkIngestParallel(b *testing.B) {
	now := time.Unix(1_700_000_000, 0)
	cfg := verify.Config{Scheme: verify.SchemeStripe, Secrets: []string{"whsec_bench"}}
	v, _ := verify.New(cfg)
	ex, _ := eventid.Parse("json:id")
	srv := gateway.New(gateway.Config{
		Sources: map[string]gateway.Source{"stripe": {Scheme: verify.SchemeStripe,
			Verifier: v, EventID: ex, PlanFunc: func(string) []string { return []string{"sink"} }}},
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
		Now:    func() time.Time { return now },
	}, benchRecorder{dedupe.Recorded{Inserted: true, Deliveries: 1, Pending: true}}, benchHandoff{})
	body := fmt.Appendf(nil, `{"id":"evt_bench_1","pad":"%s"}`, bytes.Repeat([]byte("x"), 1024-29))
	header, _, err := verify.Sign(cfg, body, now, "")
	if err != nil {
		b.Fatal(err)
	}
	header.Set("Content-Type", "application/json")
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	b.RunParallel(func(pb *testing.PB) {
		req, _ := http.NewRequest(http.MethodPost, "http://gateway/webhooks/stripe", nil)
		rb := &benchBody{}
		req.Body = rb
		req.Header = header
		req.ContentLength = int64(len(body))
		w := &benchWriter{h: http.Header{}}
		for pb.Next() {
			rb.Reset(body)
			clear(w.h)
			w.code = 0
			srv.ServeHTTP(w, req)
			if w.code != http.StatusAccepted {
				b.Errorf("status %d", w.code)
				return
			}
		}
	})
}
