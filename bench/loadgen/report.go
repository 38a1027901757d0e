package loadgen

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Report is the outcome of a run. Rates are per second of the sending
// phase; latencies are in milliseconds.
type Report struct {
	// Label names the run (Config.Label), e.g. "ack64/webhookd".
	Label string `json:"label,omitempty"`
	// Mode is "webhookd" (in-process), "naive" (NaiveServer in-process)
	// or "target" (a running gateway), with " (no worker)" appended under
	// Config.NoWorker; Serve says "server only" after "webhookd" or
	// "naive".
	Mode string `json:"mode"`
	// Loop is "closed" (Concurrency in flight), "open" (Rate per second)
	// or LoopExternal (Serve: the load came from outside).
	Loop        string  `json:"loop"`
	Concurrency int     `json:"concurrency"`
	Rate        float64 `json:"rate,omitempty"`
	// DurationSeconds is the configured sending time.
	DurationSeconds float64 `json:"duration_seconds"`
	Duplicates      float64 `json:"duplicates"`
	BodySize        int     `json:"body_size"`
	Scheme          string  `json:"scheme"`
	Preload         int64   `json:"preload,omitempty"`
	NaivePool       int     `json:"naive_pool,omitempty"`
	// Cores is the machine's CPU count.
	Cores int `json:"cores"`
	// LoadBefore and LoadAfter are /proc/loadavg's 1, 5 and 15 minute
	// averages before and after sending.
	LoadBefore string `json:"load_before"`
	LoadAfter  string `json:"load_after"`

	// Requests counts requests sent (answered or not).
	Requests int64 `json:"requests"`
	// SendSeconds is the time from the first send to the last answer.
	SendSeconds float64 `json:"send_seconds"`
	// Acks counts 2xx answers; AckRate is Acks per second.
	Acks    int64   `json:"acks"`
	AckRate float64 `json:"ack_rate"`
	// StatusCodes counts answers by HTTP status.
	StatusCodes map[string]int64 `json:"status_codes"`
	// TransportErrors counts requests that got no answer; FirstError is
	// the first such error.
	TransportErrors int64  `json:"transport_errors"`
	FirstError      string `json:"first_error,omitempty"`

	Latency Latency `json:"latency_ms"`
	// LatencyHistogram is the ack latencies' distribution in log-spaced
	// bins, the empty ones left out.
	LatencyHistogram []LatencyBin `json:"latency_histogram,omitempty"`
	// Timeline is the cumulative acks and deliveries over the run.
	Timeline Timeline `json:"timeline"`

	EndToEnd EndToEnd `json:"end_to_end"`
	CPU      CPU      `json:"cpu"`
	// PeakRSSMiB is the process's VmHWM over the sending phase (the
	// generator included when in-process).
	PeakRSSMiB float64 `json:"peak_rss_mib"`

	Check Check `json:"check"`
}

// Latency summarises ack latency in milliseconds, from an HDR histogram
// with 3 significant digits. In open loop it counts from the intended
// send time.
type Latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// EndToEnd is what reached the destination.
type EndToEnd struct {
	// Measured is false when no sink could be read.
	Measured bool `json:"measured"`
	// Delivered counts distinct keys that reached the sink.
	Delivered int64 `json:"delivered"`
	// Expected is the number of new events recorded, each of which should
	// reach the sink once.
	Expected int64 `json:"expected"`
	// Rate is Delivered per second, from the first send to the last
	// delivery.
	Rate float64 `json:"rate"`
	// DrainSeconds is the time from the end of sending to the last
	// delivery (0 when the sink kept up).
	DrainSeconds float64 `json:"drain_seconds"`
	// Drained is false when the sink did not see every expected key
	// within the drain timeout.
	Drained bool `json:"drained"`
	// When sending stopped: OutboxBacklog counts events whose hand-off to
	// the queue was still pending (-1 unknown); QueuePending and
	// QueueActive are the Asynq queue's pending and active tasks (-1
	// unknown). They show which side of the queue the drain waited on.
	OutboxBacklog int64 `json:"outbox_backlog"`
	QueuePending  int64 `json:"queue_pending"`
	QueueActive   int64 `json:"queue_active"`
	// DrainDelivered counts the keys that reached the sink after sending
	// stopped, and DrainCPU is the CPU of that drain per such key (its
	// "per ack" figures are per delivered event): with nothing sent,
	// it is what delivery alone costs (relay, worker, Asynq, Postgres,
	// Redis, sink). Zero when the sink kept up.
	DrainDelivered int64 `json:"drain_delivered"`
	DrainCPU       CPU   `json:"drain_cpu"`
}

// CPU is CPU time per acknowledged event over the sending phase, from
// /proc/stat and /proc/self/stat (10 ms ticks).
type CPU struct {
	// MachineMicrosPerAck is busy CPU of the whole machine (Postgres,
	// Redis, this process and anything else running) per ack.
	MachineMicrosPerAck float64 `json:"machine_us_per_ack"`
	// ProcessMicrosPerAck is this process's CPU per ack; in-process it
	// includes the generator's HTTP client and signing.
	ProcessMicrosPerAck float64 `json:"process_us_per_ack"`
	// MachineBusyPercent is the machine's busy share of all cores.
	MachineBusyPercent float64 `json:"machine_busy_percent"`
	// ProcessCores is the process's CPU use in cores.
	ProcessCores float64 `json:"process_cores"`
	// Groups splits the machine's CPU by process (from /proc/<pid>/stat):
	// this process, Postgres backends of the bench database, other
	// Postgres processes (background writers, other databases), Redis,
	// and "other": the rest of the machine's busy time (other users of
	// the machine, the kernel).
	Groups []CPUGroup `json:"groups,omitempty"`
}

// CPUGroup is one process group's share of the CPU during sending.
type CPUGroup struct {
	Name         string  `json:"name"`
	MicrosPerAck float64 `json:"us_per_ack"`
	Cores        float64 `json:"cores"`
}

// Check is the exactly-once check.
type Check struct {
	// Passed is true when every check that ran found nothing wrong.
	Passed bool `json:"passed"`
	// Problems describes each failure.
	Problems []string `json:"problems,omitempty"`
	// Skipped names checks that could not run (no database or sink).
	Skipped []string `json:"skipped,omitempty"`
	// DistinctSent and DistinctAcked count new event ids sent in the
	// run, and those acknowledged at least once.
	DistinctSent  int64 `json:"distinct_sent"`
	DistinctAcked int64 `json:"distinct_acked"`
	// RepeatedPreloaded counts distinct preloaded ids sent again, whose
	// delivery counts are checked too.
	RepeatedPreloaded int64 `json:"repeated_preloaded"`
	// NewRows is the growth of the source's events rows during the run.
	NewRows int64 `json:"new_rows"`
	// SinkKeys counts distinct keys at the sink; SinkRepeated those
	// called more than once.
	SinkKeys     int64 `json:"sink_keys"`
	SinkRepeated int   `json:"sink_repeated"`
	// KeysNotOnce counts acknowledged events whose key did not reach the
	// sink exactly once (in-process only).
	KeysNotOnce int64 `json:"keys_not_once"`
	// DeliveryMismatches counts events whose stored delivery count
	// differs from the copies sent.
	DeliveryMismatches int64 `json:"delivery_mismatches"`
}

func (c *Check) fail(format string, args ...any) {
	c.Problems = append(c.Problems, fmt.Sprintf(format, args...))
}

// WriteText writes the report for a terminal.
func (r *Report) WriteText(w io.Writer) error {
	if r.Loop == LoopExternal {
		return r.writeServedText(w)
	}
	var b strings.Builder
	loop := fmt.Sprintf("closed loop, %d in flight", r.Concurrency)
	if r.Loop == "open" {
		loop = fmt.Sprintf("open loop, %.0f req/s offered over %d connections", r.Rate, r.Concurrency)
	}
	fmt.Fprintf(&b, "webhookd bench — %s: %s, %.0fs, %d B bodies, scheme %s, duplicates %.2f", r.Mode, loop, r.DurationSeconds, r.BodySize, r.Scheme, r.Duplicates)
	if r.Preload > 0 {
		fmt.Fprintf(&b, ", preload %d", r.Preload)
	}
	if r.Mode == "naive" {
		fmt.Fprintf(&b, ", naive pool %d", r.NaivePool)
	}
	fmt.Fprintf(&b, "\nmachine       %d cores; load average before %s, after %s\n", r.Cores, r.LoadBefore, r.LoadAfter)
	fmt.Fprintf(&b, "requests      %d in %.2fs (%.0f/s)\n", r.Requests, r.SendSeconds, float64(r.Requests)/max(r.SendSeconds, 1e-9))
	fmt.Fprintf(&b, "acks (2xx)    %d, %.0f/s\n", r.Acks, r.AckRate)
	codes := slices.Sorted(maps.Keys(r.StatusCodes))
	var cs []string
	for _, c := range codes {
		cs = append(cs, c+": "+strconv.FormatInt(r.StatusCodes[c], 10))
	}
	fmt.Fprintf(&b, "status codes  %s; transport errors %d", strings.Join(cs, ", "), r.TransportErrors)
	if r.FirstError != "" {
		fmt.Fprintf(&b, " (first: %s)", r.FirstError)
	}
	l := r.Latency
	fmt.Fprintf(&b, "\nack latency   p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms, mean %.2f ms", l.P50, l.P90, l.P99, l.P999, l.Max, l.Mean)
	if r.Loop == "open" {
		b.WriteString(" (from intended send time)")
	}
	e := r.EndToEnd
	if e.Measured {
		fmt.Fprintf(&b, "\nend to end    %d of %d events at the sink, %.0f/s; drain %.2fs after sending stopped", e.Delivered, e.Expected, e.Rate, e.DrainSeconds)
		if !e.Drained {
			b.WriteString(" (NOT DRAINED within the timeout)")
		}
		fmt.Fprintf(&b, "\n              when sending stopped: outbox backlog %d, queue pending %d, active %d", e.OutboxBacklog, e.QueuePending, e.QueueActive)
		if e.DrainDelivered > 0 {
			writeCPUText(&b, fmt.Sprintf("cpu per delivery (drain: %d events delivered after sending stopped)", e.DrainDelivered), e.DrainCPU, "event")
		}
	} else {
		b.WriteString("\nend to end    not measured (no sink or no worker)")
	}
	writeCPUText(&b, "cpu per ack", r.CPU, "ack")
	fmt.Fprintf(&b, "\npeak rss      %.1f MiB", r.PeakRSSMiB)
	c := r.Check
	verdict := "PASS"
	if !c.Passed {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "\nexactly-once  %s: %d new ids sent, %d acked, %d new rows, %d sink keys, %d repeated keys, %d acked keys not delivered once; delivery counts of %d ids (%d of them preloaded): %d mismatches",
		verdict, c.DistinctSent, c.DistinctAcked, c.NewRows, c.SinkKeys, c.SinkRepeated, c.KeysNotOnce,
		c.DistinctSent+c.RepeatedPreloaded, c.RepeatedPreloaded, c.DeliveryMismatches)
	return writeCheckDetails(w, &b, c)
}

// writeCheckDetails ends a text report in b with the check's problems
// and skipped checks, one a line, and writes it all to w.
func writeCheckDetails(w io.Writer, b *strings.Builder, c Check) error {
	for _, p := range c.Problems {
		fmt.Fprintf(b, "\n  problem: %s", p)
	}
	for _, s := range c.Skipped {
		fmt.Fprintf(b, "\n  skipped: %s", s)
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeCPUText writes c under title, by process group, per unit.
func writeCPUText(b *strings.Builder, title string, c CPU, unit string) {
	fmt.Fprintf(b, "\n%-13s machine %.0f µs (machine %.0f%% busy), process %.0f µs (%.2f cores)",
		title, c.MachineMicrosPerAck, c.MachineBusyPercent, c.ProcessMicrosPerAck, c.ProcessCores)
	for _, g := range c.Groups {
		fmt.Fprintf(b, "\n              %-26s %6.0f µs/%s  %.2f cores", g.Name, g.MicrosPerAck, unit, g.Cores)
	}
}
