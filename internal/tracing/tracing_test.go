package tracing

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

func TestEnabled(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		given  map[string]string
		expect bool
	}{
		{name: "NothingSet", expect: false},
		{name: "OnlyServiceName", given: map[string]string{"OTEL_SERVICE_NAME": "hooks"}, expect: false},
		{name: "Endpoint", given: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, expect: true},
		{name: "TracesEndpoint", given: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, expect: true},
		{name: "Exporter", given: map[string]string{"OTEL_TRACES_EXPORTER": "console"}, expect: true},
		{name: "ExporterNone", given: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, expect: false},
		{name: "SDKDisabled", given: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, expect: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := Enabled(func(k string) string { return tc.given[k] }); got != tc.expect {
				t.Fatalf("Enabled = %v, want %v", got, tc.expect)
			}
		})
	}
}

// TestTraceParentRoundTrip: what TraceParent writes, SpanContext reads
// back; nothing and garbage read as no span.
func TestTraceParentRoundTrip(t *testing.T) {
	t.Parallel()
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:     trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8},
		TraceFlags: trace.FlagsSampled,
	})
	tp := TraceParent(trace.ContextWithSpanContext(context.Background(), sc))
	if tp != "00-0102030405060708090a0b0c0d0e0f10-0102030405060708-01" {
		t.Fatalf("TraceParent = %q", tp)
	}
	if got := SpanContext(tp); got.TraceID() != sc.TraceID() || got.SpanID() != sc.SpanID() || !got.IsSampled() || !got.IsRemote() {
		t.Fatalf("SpanContext(%q) = %v", tp, got)
	}
	if TraceParent(context.Background()) != "" {
		t.Fatal("a context without a span has a traceparent")
	}
	for _, bad := range []string{"", "00-zz-01", "00-00000000000000000000000000000000-0102030405060708-01"} {
		if SpanContext(bad).IsValid() {
			t.Fatalf("SpanContext(%q) is valid", bad)
		}
	}
}
