package gateway

import (
	"context"
	"errors"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/tracing"
)

// ingestRoute is the route of webhooks, the server span's name with its
// method.
const ingestRoute = "/webhooks/:source"

// traceIngest starts each webhook's trace when tracing is on (SPEC): the
// request's server span, which continues the sender's traceparent when it
// sent one. Its traceparent is stored with a new event (ingest), so the
// record, the hand-off and every claim and destination call of the event
// are spans of this one trace.
func (s *Server) traceIngest(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		ctx := tracing.Extract(req.Context(), propagation.HeaderCarrier(req.Header))
		ctx, span := s.tracer.Start(ctx, "POST "+ingestRoute,
			trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(
				semconv.HTTPRequestMethodPost,
				semconv.HTTPRoute(ingestRoute),
				attribute.String(tracing.SourceKey, c.Param("source")),
			))
		defer span.End()
		c.SetRequest(req.WithContext(ctx))
		err := next(c)
		code := c.Response().Status
		if err != nil {
			// The error handler answers after this returns: the status
			// is the one it will send.
			code, _ = statusOf(err)
			if errors.Is(err, context.Canceled) {
				code = statusClientClosedRequest
			}
		}
		span.SetAttributes(semconv.HTTPResponseStatusCode(code))
		if code >= 500 {
			span.SetStatus(codes.Error, "")
		}
		return err
	}
}

// record records ev under a "record" span of the request's trace when
// tracing is on (the group commit's statement, as this event waited for
// it); a new event stores the request span's traceparent.
func (s *Server) record(ctx context.Context, ev dedupe.Event) (dedupe.Recorded, error) {
	if s.tracer == nil {
		return s.recorder.Record(ctx, ev)
	}
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(attribute.String(tracing.EventIDKey, ev.ExternalID))
	ev.TraceParent = tracing.TraceParent(ctx)
	ctx, rspan := s.tracer.Start(ctx, "webhookd.record")
	defer rspan.End()
	rec, err := s.recorder.Record(ctx, ev)
	switch {
	case err != nil:
		rspan.SetStatus(codes.Error, err.Error())
	case rec.CopyOf != "":
		rspan.SetAttributes(attribute.String(tracing.OutcomeKey, "duplicate_content"))
	case rec.Inserted:
		rspan.SetAttributes(attribute.String(tracing.OutcomeKey, "accepted"))
	default:
		rspan.SetAttributes(attribute.String(tracing.OutcomeKey, "duplicate"), attribute.Int("webhookd.deliveries", rec.Deliveries))
	}
	return rec, err
}
