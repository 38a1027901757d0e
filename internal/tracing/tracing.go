// Package tracing sets up OpenTelemetry tracing from the standard OTEL_*
// environment variables and carries an event's trace context in the one
// form webhookd stores: a W3C traceparent string.
//
// Tracing is off unless the environment asks for an exporter
// (OTEL_TRACES_EXPORTER, or an OTLP endpoint); off, FromEnv returns a nil
// provider, and every part of webhookd then skips its spans, so the cost is
// a nil check. The exporter is built by the OpenTelemetry contrib autoexport
// package and the SDK reads its own variables (sampler, batch processor,
// resource), so no OTEL_* variable is parsed here beyond deciding whether
// tracing is on.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of every webhookd span.
const ScopeName = "github.com/webhookd/webhookd"

// ServiceName is the service.name of webhookd's spans unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES name another.
const ServiceName = "webhookd"

// Enabled reports whether the environment (read through getenv) asks for
// traces: OTEL_TRACES_EXPORTER is set to something other than "none", or
// an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set; and OTEL_SDK_DISABLED is not
// "true".
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); {
	case exp == "none":
		return false
	case exp != "":
		return true
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Provider is a running tracer provider; Shutdown flushes the spans it
// still holds.
type Provider interface {
	trace.TracerProvider
	// Shutdown exports what is buffered and stops the exporter.
	Shutdown(ctx context.Context) error
}

// FromEnv returns the tracer provider the OTEL_* environment asks for, or
// nil when tracing is off (Enabled). Its exporter is OTEL_TRACES_EXPORTER's
// (default "otlp", over OTEL_EXPORTER_OTLP_PROTOCOL, default
// http/protobuf); the sampler (OTEL_TRACES_SAMPLER, default parent-based
// always-on), the batch processor (OTEL_BSP_*) and the resource
// (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES) are the SDK's. It returns
// an error for a variable the exporter refuses.
func FromEnv(ctx context.Context) (Provider, error) {
	if !Enabled(os.Getenv) {
		return nil, nil
	}
	exp, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		// The exporter's errors do not say which value they refuse.
		var set []string
		for _, k := range []string{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
			if v := os.Getenv(k); v != "" {
				set = append(set, fmt.Sprintf("%s=%q", k, v))
			}
		}
		return nil, fmt.Errorf("trace exporter (%s): %w", strings.Join(set, ", "), err)
	}
	if autoexport.IsNoneSpanExporter(exp) {
		return nil, nil
	}
	// The default service name first: the environment's, read after it,
	// wins.
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(ServiceName)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("error reading OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// Tracer returns webhookd's tracer of tp, or nil when tp is nil (tracing
// off): callers skip their spans on a nil tracer.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(ScopeName)
}

// traceContext is the W3C Trace Context propagator: traceparent and
// tracestate, nothing else (no baggage travels with an event).
var traceContext propagation.TraceContext

// TraceParent returns the W3C traceparent of ctx's span, or "" when ctx
// carries no valid span context.
func TraceParent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	carrier := propagation.MapCarrier{}
	traceContext.Inject(ctx, carrier)
	return carrier.Get("traceparent")
}

// SpanContext returns the remote span context a stored traceparent names;
// it is invalid (IsValid false) for "" or a malformed value.
func SpanContext(traceParent string) trace.SpanContext {
	if traceParent == "" {
		return trace.SpanContext{}
	}
	ctx := traceContext.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceParent})
	return trace.SpanContextFromContext(ctx)
}

// Extract returns ctx with the remote span context of the traceparent
// (and tracestate) in h, as a sender or a caller sent them; ctx as is
// when h has none or an invalid one.
func Extract(ctx context.Context, h propagation.TextMapCarrier) context.Context {
	return traceContext.Extract(ctx, h)
}

// Inject writes the traceparent (and tracestate) of ctx's span into h;
// nothing when ctx carries no valid span context.
func Inject(ctx context.Context, h propagation.TextMapCarrier) {
	traceContext.Inject(ctx, h)
}

// Attribute keys of webhookd's spans.
const (
	// SourceKey is the source's name.
	SourceKey = "webhookd.source"
	// EventIDKey is the event's external id.
	EventIDKey = "webhookd.event_id"
	// DestinationKey is the destination's name.
	DestinationKey = "webhookd.destination"
	// JobKey is the job key, as sent in Idempotency-Key.
	JobKey = "webhookd.key"
	// AttemptKey is the call number of the key (Webhookd-Attempt).
	AttemptKey = "webhookd.attempt"
	// GenerationKey is the run's generation: 1, or a forced replay's.
	GenerationKey = "webhookd.generation"
	// OutcomeKey is how a step ended, in the words of the metrics'
	// outcome label.
	OutcomeKey = "webhookd.outcome"
	// RecoveryKey says why recovery acted on a run or task ("lease
	// passed", "retry due", "event not claimed").
	RecoveryKey = "webhookd.recovery"
	// EventsKey counts the events of a batch.
	EventsKey = "webhookd.events"
	// LinkKey, on a link, says why a span links to the event's trace:
	// "retry" or "replay".
	LinkKey = "webhookd.link"
)
