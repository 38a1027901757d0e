package jobs

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the queue side's Prometheus metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	outcomes       *prometheus.CounterVec
	latency        *prometheus.HistogramVec
	enqueueFails   prometheus.Counter
	relayed        prometheus.Counter
	relayBacklog   prometheus.Gauge
	sweeperResets  *prometheus.CounterVec
	queueSize      *prometheus.GaugeVec
	duplicateCheck prometheus.Gauge
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhookd_job_outcomes_total",
			Help: "Deliver task outcomes by destination and outcome.",
		}, []string{"destination", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "webhookd_destination_latency_seconds",
			Help:    "Duration of destination calls.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
		}, []string{"destination"}),
		enqueueFails: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "webhookd_enqueue_failures_total",
			Help: "Hand-offs to the queue that failed (the relay retries them).",
		}),
		relayed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "webhookd_relay_enqueued_total",
			Help: "Events the relay found pending and enqueued.",
		}),
		relayBacklog: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "webhookd_relay_backlog",
			Help: "Events recorded whose hand-off to the queue is pending.",
		}),
		sweeperResets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhookd_sweeper_resets_total",
			Help: "Runs whose lease passed, reset by the sweeper, by resulting status.",
		}, []string{"status"}),
		queueSize: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "webhookd_queue_size",
			Help: "Tasks in the Asynq queue by state.",
		}, []string{"queue", "state"}),
		duplicateCheck: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "webhookd_duplicate_keys",
			Help: "Keys with more than one successful destination call in the last 7 days (should be 0).",
		}),
	}
	reg.MustRegister(m.outcomes, m.latency, m.enqueueFails, m.relayed, m.relayBacklog,
		m.sweeperResets, m.queueSize, m.duplicateCheck)
	return m
}

func (m *Metrics) outcome(destination, outcome string) {
	if m != nil {
		m.outcomes.WithLabelValues(destination, outcome).Inc()
	}
}

func (m *Metrics) destinationLatency(destination string, d time.Duration) {
	if m != nil && d > 0 {
		m.latency.WithLabelValues(destination).Observe(d.Seconds())
	}
}

func (m *Metrics) enqueueFailed() {
	if m != nil {
		m.enqueueFails.Inc()
	}
}

func (m *Metrics) relayedEvents(n int) {
	if m != nil {
		m.relayed.Add(float64(n))
	}
}

func (m *Metrics) backlog(n int64) {
	if m != nil {
		m.relayBacklog.Set(float64(n))
	}
}

func (m *Metrics) swept(status string) {
	if m != nil {
		m.sweeperResets.WithLabelValues(status).Inc()
	}
}

func (m *Metrics) queueState(queue, state string, n int) {
	if m != nil {
		m.queueSize.WithLabelValues(queue, state).Set(float64(n))
	}
}

// SetDuplicateKeys exports the duplicate check's latest count.
func (m *Metrics) SetDuplicateKeys(n int) {
	if m != nil {
		m.duplicateCheck.Set(float64(n))
	}
}
