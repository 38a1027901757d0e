package jobs

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhookd/webhookd/dedupe"
)

// Metrics are the queue side's Prometheus metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	outcomes *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	calls    *prometheus.CounterVec
	// Steering: holds by reason, each destination's state and calls in
	// flight.
	holds        *prometheus.CounterVec
	state        *prometheus.GaugeVec
	inFlight     *prometheus.GaugeVec
	enqueueFails prometheus.Counter
	relayBacklog prometheus.Gauge
	// Ordered delivery (fifo): runs held behind an earlier event of
	// their entity, and the oldest one's wait.
	orderWaiting *prometheus.GaugeVec
	orderOldest  *prometheus.GaugeVec
	// fair_by: the values (tenants) sharing a destination now.
	fairValues    *prometheus.GaugeVec
	sweeperResets *prometheus.CounterVec
	// Recovery (the reconciler).
	recoveryPasses *prometheus.CounterVec
	recoveryTasks  *prometheus.CounterVec
	queueSize      *prometheus.GaugeVec
	queueLatency   *prometheus.GaugeVec
	duplicateCheck prometheus.Gauge
	unknownOutcome prometheus.Gauge
	// Scheduled maintenance (retention, duplicate check).
	maintenanceRuns *prometheus.CounterVec
	retentionRows   *prometheus.CounterVec
	lastOK          map[string]prometheus.Gauge
}

// NewMetrics creates the metrics and registers them with reg, among them
// webhookd_maintenance_runs_total{job,result},
// webhookd_retention_rows_deleted_total{table},
// webhookd_retention_last_success_timestamp_seconds and
// webhookd_duplicate_check_last_success_timestamp_seconds.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhookd_job_outcomes_total",
			Help: "Deliver task outcomes by source, destination and outcome.",
		}, []string{"source", "destination", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "webhookd_destination_latency_seconds",
			Help:    "Duration of destination calls.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
		}, []string{"source", "destination"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhookd_destination_calls_total",
			Help: "Destination calls by the class of their answer (2xx, 3xx, 4xx, 5xx, error: no answer).",
		}, []string{"source", "destination", "class"}),
		holds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhookd_destination_holds_total",
			Help: "Calls held back before their claim, by reason (paused, circuit_open, circuit_probe, concurrency, rate); a hold spends no attempt.",
		}, []string{"source", "destination", "reason"}),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "webhookd_destination_state",
			Help: "1 for each destination's current state (active, paused, open), 0 for the others.",
		}, []string{"source", "destination", "state"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "webhookd_destination_in_flight",
			Help: "Calls in flight to each destination, all workers together.",
		}, []string{"source", "destination"}),
		enqueueFails: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "webhookd_enqueue_failures_total",
			Help: "Hand-offs to the queue that failed (the reconciler writes those tasks once Redis answers).",
		}),
		relayBacklog: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "webhookd_relay_backlog",
			Help: "Events of configured sources in the outbox: recorded, some destination not yet claimed by a worker.",
		}),
		orderWaiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "webhookd_order_waiting",
			Help: "Runs held behind an earlier event of their entity (order mode fifo), per destination.",
		}, []string{"source", "destination"}),
		orderOldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "webhookd_order_oldest_wait_seconds",
			Help: "How long the oldest run held behind an earlier event of its entity has waited (order mode fifo); 0 when none waits. Alert when it grows: an entity may wait behind a dead event (on_failure: hold).",
		}, []string{"source", "destination"}),
		fairValues: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "webhookd_fair_values_active",
			Help: "fair_by values (tenants) with calls waiting or in flight, among which each destination's concurrency is shared now; 0 without fair_by. Calls held for a fair share count in webhookd_destination_holds_total{reason=\"fair_share\"}.",
		}, []string{"source", "destination"}),
		sweeperResets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhookd_sweeper_resets_total",
			Help: "Runs whose lease passed, taken back by the reconciler, by resulting status.",
		}, []string{"status"}),
		recoveryPasses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhookd_recovery_passes_total",
			Help: "Reconciler passes by result (success, error, skipped: another process was running one).",
		}, []string{"result"}),
		recoveryTasks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhookd_recovery_tasks_total",
			Help: "Tasks the reconciler checked, by what it found or did (pending, waiting, active: left as they were; written: Redis had lost it; rescued: held by a dead worker; hastened; revived; unrouted).",
		}, []string{"action"}),
		queueSize: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "webhookd_queue_size",
			Help: "Tasks in the Asynq queue by state.",
		}, []string{"queue", "state"}),
		queueLatency: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "webhookd_queue_latency_seconds",
			Help: "Age of the oldest pending task in the Asynq queue (how long the next task has waited for a worker); 0 when none waits.",
		}, []string{"queue"}),
		duplicateCheck: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "webhookd_duplicate_keys",
			Help: "Keys with more than one successful destination call in the last 7 days (should be 0).",
		}),
		unknownOutcome: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "webhookd_unknown_outcome_calls",
			Help: "Destination calls in the last 7 days whose outcome was never stored (a worker stopped mid-call): possible duplicates at the destination.",
		}),
		maintenanceRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhookd_maintenance_runs_total",
			Help: "Scheduled maintenance runs by job (retention, duplicate_check) and result (success, error, skipped, canceled).",
		}, []string{"job", "result"}),
		retentionRows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhookd_retention_rows_deleted_total",
			Help: "Rows deleted by retention, by table.",
		}, []string{"table"}),
		lastOK: map[string]prometheus.Gauge{
			dedupe.KindRetention: prometheus.NewGauge(prometheus.GaugeOpts{
				Name: "webhookd_retention_last_success_timestamp_seconds",
				Help: "Unix time of the latest successful retention run on any replica (read from the database at start); 0 if none. Alert when it falls behind.",
			}),
			dedupe.KindDuplicateCheck: prometheus.NewGauge(prometheus.GaugeOpts{
				Name: "webhookd_duplicate_check_last_success_timestamp_seconds",
				Help: "Unix time of the latest successful duplicate check; 0 if none.",
			}),
		},
	}
	for _, result := range []string{"success", "error", "skipped"} {
		m.recoveryPasses.WithLabelValues(result)
	}
	for _, status := range []string{dedupe.StatusFailed, dedupe.StatusDead} {
		m.sweeperResets.WithLabelValues(status)
	}
	reg.MustRegister(m.outcomes, m.latency, m.calls, m.holds, m.state, m.inFlight, m.enqueueFails, m.relayBacklog, m.orderWaiting, m.orderOldest, m.fairValues,
		m.sweeperResets, m.recoveryPasses, m.recoveryTasks, m.queueSize, m.queueLatency, m.duplicateCheck, m.unknownOutcome, m.maintenanceRuns, m.retentionRows,
		m.lastOK[dedupe.KindRetention], m.lastOK[dedupe.KindDuplicateCheck])
	return m
}

func (m *Metrics) outcome(source, destination, outcome string) {
	if m != nil {
		m.outcomes.WithLabelValues(source, destination, outcome).Inc()
	}
}

// called counts a call that went out, by its answer's class (a broker's
// acknowledgement, acked without an HTTP status, is 2xx), and its
// duration.
func (m *Metrics) called(source, destination string, statusCode int, acked bool, d time.Duration) {
	if m == nil {
		return
	}
	class := "error"
	switch {
	case statusCode >= 200 && statusCode < 600:
		class = strconv.Itoa(statusCode/100) + "xx"
	case acked:
		class = "2xx" // a broker's acknowledgement
	}
	m.calls.WithLabelValues(source, destination, class).Inc()
	if d > 0 {
		m.latency.WithLabelValues(source, destination).Observe(d.Seconds())
	}
}

func (m *Metrics) held(source, destination, reason string) {
	if m != nil {
		m.holds.WithLabelValues(source, destination, reason).Inc()
	}
}

// destinationState sets a destination's state gauge and calls in flight.
func (m *Metrics) destinationState(source, destination string, st DestinationState) {
	if m == nil {
		return
	}
	for _, s := range destinationStates {
		v := 0.0
		if s == st.State {
			v = 1
		}
		m.state.WithLabelValues(source, destination, s).Set(v)
	}
	m.inFlight.WithLabelValues(source, destination).Set(float64(st.InFlight))
	m.fairValues.WithLabelValues(source, destination).Set(float64(st.FairValues))
}

// destinationStates lists the states a destination reports.
var destinationStates = []string{"active", "paused", "open"}

// RegisterDestinations makes every series an alert may watch for each
// destination of routes exist at zero: outcomes, calls by class, holds,
// the state (active) and calls in flight; rule errors for a destination
// with rules.
func (m *Metrics) RegisterDestinations(routes Routes) {
	if m == nil {
		return
	}
	for source, dests := range routes {
		for name, d := range dests {
			outcomes := []string{dedupe.StatusDone, "retry", dedupe.StatusFailed, dedupe.StatusDead, "held", dedupe.StatusFiltered}
			if d.Rules != nil {
				outcomes = append(outcomes, "rule_error")
			}
			for _, o := range outcomes {
				m.outcomes.WithLabelValues(source, name, o)
			}
			for _, c := range []string{"2xx", "3xx", "4xx", "5xx", "error"} {
				m.calls.WithLabelValues(source, name, c)
			}
			m.latency.WithLabelValues(source, name)
			for _, r := range holdReasons {
				m.holds.WithLabelValues(source, name, r)
			}
			m.destinationState(source, name, DestinationState{State: "active"})
			m.orderWaiting.WithLabelValues(source, name)
			m.orderOldest.WithLabelValues(source, name)
		}
	}
}

// orderWaits sets the order gauges of every destination of routes: those
// in waits to their counts, the others to 0.
func (m *Metrics) orderWaits(routes Routes, waits []dedupe.OrderWait) {
	if m == nil {
		return
	}
	for source, dests := range routes {
		for name := range dests {
			m.orderWaiting.WithLabelValues(source, name).Set(0)
			m.orderOldest.WithLabelValues(source, name).Set(0)
		}
	}
	for _, w := range waits {
		if _, ok := routes[w.Source][w.Destination]; ok {
			m.orderWaiting.WithLabelValues(w.Source, w.Destination).Set(float64(w.Waiting))
			m.orderOldest.WithLabelValues(w.Source, w.Destination).Set(w.Oldest.Seconds())
		}
	}
}

func (m *Metrics) enqueueFailed() {
	if m != nil {
		m.enqueueFails.Inc()
	}
}

func (m *Metrics) recoveryPass(result string) {
	if m != nil {
		m.recoveryPasses.WithLabelValues(result).Inc()
	}
}

func (m *Metrics) taskAction(action string) {
	if m != nil {
		m.recoveryTasks.WithLabelValues(action).Inc()
	}
}

// registerTaskActions makes every task action's series exist at zero.
func (m *Metrics) registerTaskActions() {
	if m == nil {
		return
	}
	for _, a := range taskActions {
		m.recoveryTasks.WithLabelValues(string(a))
	}
	m.recoveryTasks.WithLabelValues("unrouted")
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

func (m *Metrics) queueWait(queue string, oldest time.Duration) {
	if m != nil {
		m.queueLatency.WithLabelValues(queue).Set(oldest.Seconds())
	}
}

func (m *Metrics) duplicateKeys(n int) {
	if m != nil {
		m.duplicateCheck.Set(float64(n))
	}
}

func (m *Metrics) unknownCalls(n int) {
	if m != nil {
		m.unknownOutcome.Set(float64(n))
	}
}

func (m *Metrics) maintenanceRun(job, result string) {
	if m != nil {
		m.maintenanceRuns.WithLabelValues(job, result).Inc()
	}
}

func (m *Metrics) lastSuccess(job string, t time.Time) {
	if m != nil {
		m.lastOK[job].Set(float64(t.UnixNano()) / 1e9)
	}
}

func (m *Metrics) retentionDeleted(r dedupe.RetentionResult) {
	if m == nil {
		return
	}
	for table, n := range map[string]int64{
		"events": r.Events, "job_runs": r.Runs, "delivery_attempts": r.Attempts, "maintenance_runs": r.MaintenanceRuns,
		"issues": r.Issues,
	} {
		if n > 0 {
			m.retentionRows.WithLabelValues(table).Add(float64(n))
		}
	}
}
