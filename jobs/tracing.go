package jobs

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/tracing"
)

// An event's trace (SPEC): the gateway's request span stores its
// traceparent with the event (dedupe.Event.TraceParent); the relay's
// "webhookd.handoff" span and, for every claim that gets the key, the
// worker's "webhookd.deliver" span (with its "webhookd.claim" and the
// destination call's client span "POST") are in that trace, whichever
// path brought the task (relay, reconciler, sweeper, replay), because the
// claim reads the traceparent from Postgres. A retry (call 2 and up) or a
// replay (generation 2 and up) joins the trace as a linked span: a child
// of the request span with a link to it saying why. The destination gets
// the call span's traceparent. With tracing off the tracer is nil and
// none of this runs.

// traceHandOff ends a "webhookd.handoff" span, from Notify to the end of
// the enqueue, for each event of batch that came with a span context.
func (r *Relay) traceHandOff(batch []notified, err error) {
	if r.tracer == nil {
		return
	}
	for _, n := range batch {
		if !n.span.IsValid() {
			continue
		}
		ctx := trace.ContextWithSpanContext(context.Background(), n.span)
		_, span := r.tracer.Start(ctx, "webhookd.handoff",
			trace.WithSpanKind(trace.SpanKindProducer),
			trace.WithTimestamp(n.at),
			trace.WithAttributes(
				attribute.String(tracing.SourceKey, n.ref.Source),
				attribute.String(tracing.EventIDKey, n.ref.ExternalID),
				attribute.Int(tracing.EventsKey, len(batch)),
			))
		if err != nil {
			span.SetStatus(codes.Error, "hand-off failed; the reconciler enqueues the event")
		}
		span.End()
	}
}

// traceRecovery records what recovery did about t (why: the reconciler's
// reason; action: the task's action, or the swept run's status) as a
// "webhookd.recover" span in the event's trace, when tracing is on and
// the event has one.
func (r *Reconciler) traceRecovery(t pendingTask, why, action string) {
	if r.tracer == nil {
		return
	}
	event := tracing.SpanContext(t.traceParent)
	if !event.IsValid() {
		return
	}
	p := t.payload
	_, span := r.tracer.Start(trace.ContextWithRemoteSpanContext(context.Background(), event), "webhookd.recover",
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			attribute.String(tracing.SourceKey, p.Source),
			attribute.String(tracing.EventIDKey, p.EventID),
			attribute.String(tracing.DestinationKey, p.Destination),
			attribute.String(tracing.JobKey, p.Key()),
			attribute.Int(tracing.GenerationKey, p.generation()),
			attribute.String(tracing.RecoveryKey, why),
			attribute.String(tracing.OutcomeKey, action),
		))
	if action == dedupe.StatusDead {
		span.SetStatus(codes.Error, "lease passed and attempts are exhausted")
	}
	span.End()
}

// claimStarted returns the time a claim starts when tracing is on, for
// the claim span that startDeliver records once the claim has read the
// event's trace; the zero time when off.
func (h *Handler) claimStarted() time.Time {
	if h.tracer == nil {
		return time.Time{}
	}
	return time.Now()
}

// startDeliver starts the "webhookd.deliver" span of a claimed run in its
// event's trace, with a "webhookd.claim" child from claimStart to now,
// and returns ctx with it. A retry or a replay links to the event's
// request span. With tracing off it returns ctx and its (no-op) span.
func (h *Handler) startDeliver(ctx context.Context, p DeliverPayload, claim dedupe.Claim, claimStart time.Time) (context.Context, trace.Span) {
	if h.tracer == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	attrs := []attribute.KeyValue{
		attribute.String(tracing.SourceKey, p.Source),
		attribute.String(tracing.EventIDKey, p.EventID),
		attribute.String(tracing.DestinationKey, p.Destination),
		attribute.String(tracing.JobKey, p.Key()),
		attribute.Int(tracing.AttemptKey, claim.Call),
		attribute.Int(tracing.GenerationKey, p.generation()),
	}
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithTimestamp(claimStart),
		trace.WithAttributes(attrs...),
	}
	if event := tracing.SpanContext(claim.Event.TraceParent); event.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, event)
		why := ""
		switch {
		case p.generation() > 1:
			why = "replay"
		case claim.Call > 1:
			why = "retry"
		}
		if why != "" {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: event, Attributes: []attribute.KeyValue{attribute.String(tracing.LinkKey, why)}}))
		}
	}
	ctx, span := h.tracer.Start(ctx, "webhookd.deliver", opts...)
	_, claimSpan := h.tracer.Start(ctx, "webhookd.claim", trace.WithTimestamp(claimStart))
	claimSpan.End()
	return ctx, span
}

// startCall starts the destination call's client span, whose traceparent
// the destination receives (injectTraceContext).
func (h *Handler) startCall(ctx context.Context, dest Destination, call int) (context.Context, trace.Span) {
	if h.tracer == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	attrs := []attribute.KeyValue{
		semconv.HTTPRequestMethodPost,
		semconv.URLFull(redactURL(dest.URL)),
		attribute.String(tracing.DestinationKey, dest.Name),
		attribute.Int(tracing.AttemptKey, call),
	}
	if u, err := url.Parse(dest.URL); err == nil {
		attrs = append(attrs, semconv.ServerAddress(u.Hostname()))
	}
	return h.tracer.Start(ctx, http.MethodPost, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endCall ends the call span with what the call produced.
func endCall(span trace.Span, res callResult) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.String(tracing.OutcomeKey, string(res.outcome)))
	if res.statusCode != 0 {
		span.SetAttributes(semconv.HTTPResponseStatusCode(res.statusCode))
	}
	if res.outcome != dedupe.OutcomeDone {
		span.SetStatus(codes.Error, res.err)
	}
}

// injectTraceContext adds the traceparent of ctx's span to a destination
// call's headers; nothing when tracing is off.
func injectTraceContext(ctx context.Context, h http.Header) {
	tracing.Inject(ctx, propagation.HeaderCarrier(h))
}
