package gateway

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	received *prometheus.CounterVec
	ack      *prometheus.HistogramVec
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
	}
	reg.MustRegister(m.received, m.ack)
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
func (m *metrics) registerSources(sources map[string]Source) {
	for name := range sources {
		for _, outcome := range receivedOutcomes {
			m.received.WithLabelValues(name, outcome)
		}
		m.ack.WithLabelValues(name)
	}
	m.received.WithLabelValues("unknown", "rejected_unknown_source")
}

func (m *metrics) observe(source, outcome string, d time.Duration) {
	m.received.WithLabelValues(source, outcome).Inc()
	m.ack.WithLabelValues(source).Observe(d.Seconds())
}
