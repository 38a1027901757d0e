package gateway

import (
	"context"
	"errors"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway/eventid"
	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/jobs"
)

type metrics struct {
	received  *prometheus.CounterVec
	ack       *prometheus.HistogramVec
	unordered *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhookd_received_total",
			Help: "Webhook deliveries received, by source and outcome (accepted, duplicate, duplicate_content: a copy under another event id, rejected_<reason>; rejected_busy: the bodies in flight held the server's budget).",
		}, []string{"source", "outcome"}),
		ack: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "webhookd_ack_latency_seconds",
			Help:    "Time from request to answer for webhook deliveries, by source.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}, []string{"source"}),
		unordered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhookd_unordered_events_total",
			Help: "Events of a source with order recorded without its entity (or version) field, by source: delivered unordered.",
		}, []string{"source"}),
	}
	reg.MustRegister(m.received, m.ack, m.unordered)
	return m
}

// receivedOutcomes are the outcomes of webhookd_received_total that
// exist at zero for every configured source from the start, so an alert
// on their increase sees the first one. Rarer outcomes (challenge,
// client_closed) appear when they first happen.
var receivedOutcomes = []string{
	"accepted", "duplicate", "duplicate_content", "unavailable",
	"rejected_unreadable", "rejected_too_large", "rejected_signature",
	"rejected_event_id", "rejected_header", "rejected_invalid", "rejected_busy",
}

// registerSources makes every source's series exist at zero.
func (m *metrics) registerSources(sources Sources) {
	for name := range sources {
		for _, outcome := range receivedOutcomes {
			m.received.WithLabelValues(name, outcome)
		}
		m.ack.WithLabelValues(name)
		if sources[name].OrderEntity != nil {
			m.unordered.WithLabelValues(name)
		}
	}
	m.received.WithLabelValues("unknown", "rejected_unknown_source")
}

// outcomeOf is the webhookd_received_total outcome of a request answered
// with err: one mapping, beside statusOf's, from what went wrong to the
// label that counts it.
func outcomeOf(err error) string {
	switch {
	case errors.Is(err, jobs.ErrUnknownSource):
		return "rejected_unknown_source"
	case errors.Is(err, ErrBodyTooLarge):
		return "rejected_too_large"
	case errors.Is(err, ErrUnreadableBody):
		return "rejected_unreadable"
	case errors.Is(err, ErrBusy):
		return "rejected_busy"
	case errors.Is(err, verify.ErrHandshakeRefused):
		return "rejected_handshake"
	case errors.Is(err, verify.ErrMissingSignature), errors.Is(err, verify.ErrMalformedSignature),
		errors.Is(err, verify.ErrSignatureMismatch), errors.Is(err, verify.ErrTimestampOutsideTolerance):
		return "rejected_signature"
	case errors.Is(err, echo.ErrMethodNotAllowed):
		return "rejected_method"
	case errors.Is(err, ErrInvalidHeader), errors.Is(err, ErrHeadersTooLarge):
		return "rejected_header"
	case errors.Is(err, eventid.ErrMissing), errors.Is(err, eventid.ErrUnparseable), errors.Is(err, eventid.ErrInvalid):
		return "rejected_event_id"
	case errors.Is(err, dedupe.ErrInvalidInput):
		return "rejected_invalid"
	case errors.Is(err, context.Canceled):
		return "client_closed"
	}
	return "unavailable"
}

func (m *metrics) observe(source, outcome string, d time.Duration) {
	m.received.WithLabelValues(source, outcome).Inc()
	m.ack.WithLabelValues(source).Observe(d.Seconds())
}
