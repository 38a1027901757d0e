package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// LoopExternal is Report.Loop for a run whose load came from a generator
// outside this process (Serve).
const LoopExternal = "external"

const (
	// loadPoll is how often Serve looks at the connections to its
	// address; the measured window's ends are this precise.
	loadPoll = 20 * time.Millisecond
	// loadIdle is how long no connection may be open before Serve takes
	// the load as stopped (a generator reconnecting after an error is
	// not the end).
	loadIdle = 300 * time.Millisecond
)

// Serve starts the system under test in this process as Run does, on
// cfg.Listen, and sends nothing: an outside generator (wrk) sends. It
// calls ready with the base URL once the server answers, measures from
// the first connection to cfg.Listen until none has been open for a
// moment, and returns the report. The generator's cost is then outside
// "this process".
//
// Acks are counted from the database: Report.Acks is the growth of the
// source's delivery counts (a new event counts 1, each repeat 1 more),
// Check.NewRows the new events. Latency and status codes are the
// generator's to report. With a worker the queue is drained and the sink
// checked as in Run; the per-id checks against the copies sent need the
// generator's book and are skipped.
func Serve(ctx context.Context, cfg Config, ready func(baseURL string)) (*Report, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Listen == "" {
		return nil, errors.New("loadgen: Serve needs Listen, the address the generator sends to")
	}
	src := *cfg.Source
	rep := &Report{
		Label:    cfg.Label,
		Mode:     "webhookd",
		Loop:     LoopExternal,
		BodySize: cfg.BodySize,
		Scheme:   src.Verify.Scheme,
		Preload:  cfg.Preload,
		Cores:    runtime.NumCPU(),
	}
	if cfg.Naive {
		rep.Mode, rep.NaivePool = "naive", cfg.NaivePool
	}
	rep.Mode += " (server only; the generator is outside this process)"
	if cfg.NoWorker {
		rep.Mode += " (no worker)"
	}

	sys, err := startSystem(ctx, cfg)
	defer sys.close()
	if err != nil {
		return nil, err
	}
	rep.Preload = sys.preload
	if err := waitHealthy(ctx, sys.url); err != nil {
		return nil, err
	}
	// The health check's connection would look like load.
	http.DefaultClient.CloseIdleConnections()
	u, err := url.Parse(sys.url)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return nil, fmt.Errorf("error reading the port of %s: %w", sys.url, err)
	}
	baseRows, baseAcks, err := countDeliveries(ctx, sys.pool, src.Name)
	if err != nil {
		return nil, err
	}
	database := ""
	if cc, err := pgx.ParseConfig(cfg.DatabaseURL); err == nil {
		database = cc.Database
	}
	rep.LoadBefore = loadAverage()
	if ready != nil {
		ready(sys.url)
	}

	// Measure from the first connection until none is left.
	var (
		start, end     time.Time
		cpu0, cpu1     cpuSample
		procs0, procs1 procTicks
	)
	tick := time.NewTicker(loadPoll)
	defer tick.Stop()
	for start.IsZero() {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
		if n, err := connections(port); err != nil {
			return nil, err
		} else if n > 0 {
			start, cpu0, procs0 = time.Now(), readCPU(), readProcs(database)
			resetPeakRSS()
		}
	}
	for end.IsZero() || time.Since(end) < loadIdle {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
		n, err := connections(port)
		switch {
		case err != nil:
			return nil, err
		case n > 0:
			end = time.Time{}
		case end.IsZero():
			end, cpu1, procs1 = time.Now(), readCPU(), readProcs(database)
		}
	}
	sentSink := int64(-1)
	if sys.sink != nil {
		if st, err := sys.sink.stats(ctx); err == nil {
			sentSink = int64(st.Keys)
		}
	}
	backlog, pending, active := queueState(ctx, sys.pool, cfg)
	rep.PeakRSSMiB = float64(peakRSS()) / (1 << 20)
	rep.LoadAfter = loadAverage()

	rows, acks, err := countDeliveries(ctx, sys.pool, src.Name)
	if err != nil {
		return nil, err
	}
	newRows := rows - baseRows
	rep.SendSeconds = end.Sub(start).Seconds()
	rep.DurationSeconds = rep.SendSeconds
	rep.Acks = acks - baseAcks
	rep.AckRate = float64(rep.Acks) / rep.SendSeconds
	rep.CPU = cpuOver(cpu0, cpu1, procs0, procs1, rep.Acks, rep.SendSeconds)

	if sys.sink != nil {
		rep.EndToEnd = drain(ctx, sys.sink, 0, newRows, start, end, cfg.DrainTimeout, cfg.Progress)
		rep.EndToEnd.OutboxBacklog, rep.EndToEnd.QueuePending, rep.EndToEnd.QueueActive = backlog, pending, active
		cpu2, procs2 := readCPU(), readProcs(database)
		if during := rep.EndToEnd.Delivered - sentSink; sentSink >= 0 && during > 0 {
			rep.EndToEnd.DrainDelivered = during
			rep.EndToEnd.DrainCPU = cpuOver(cpu1, cpu2, procs1, procs2, during, time.Since(end).Seconds())
		}
	}
	c := &rep.Check
	c.NewRows = newRows
	c.Skipped = append(c.Skipped, "per-id delivery counts against the copies sent (the generator is outside this process: compare its 2xx count with the acks)")
	if sys.sink == nil {
		c.Skipped = append(c.Skipped, "sink (no worker)")
	} else {
		checkSink(ctx, c, sys.sink, 0, newRows)
	}
	c.Passed = len(c.Problems) == 0
	return rep, nil
}

// countDeliveries returns the source's events and the sum of their
// delivery counts: each 2xx answer added one to the sum.
func countDeliveries(ctx context.Context, pool *pgxpool.Pool, source string) (rows, deliveries int64, err error) {
	err = pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(deliveries), 0) FROM event_deliveries WHERE source = $1`, source).
		Scan(&rows, &deliveries)
	if err != nil {
		return 0, 0, fmt.Errorf("error counting events: %w", err)
	}
	return rows, deliveries, nil
}

// connections counts the established TCP connections whose local port is
// port, from /proc/net/tcp and /proc/net/tcp6: a generator's connections
// to the server, which mark when load starts and stops without touching
// the server's code.
func connections(port int) (int, error) {
	want := fmt.Sprintf(":%04X", port)
	n, read := 0, 0
	for _, name := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		read++
		for line := range strings.SplitSeq(string(b), "\n") {
			// sl local_address rem_address st ...; st 01 is ESTABLISHED.
			f := strings.Fields(line)
			if len(f) > 3 && f[3] == "01" && strings.HasSuffix(f[1], want) {
				n++
			}
		}
	}
	if read == 0 {
		return 0, errors.New("loadgen: Serve needs Linux's /proc/net/tcp to see when load starts and stops")
	}
	return n, nil
}

// writeServedText is WriteText for a Serve report: what the server saw,
// without the generator's figures (requests, status codes, latency).
func (r *Report) writeServedText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "webhookd bench — %s: %d B bodies, scheme %s", r.Mode, r.BodySize, r.Scheme)
	if r.Preload > 0 {
		fmt.Fprintf(&b, ", preload %d", r.Preload)
	}
	if r.NaivePool > 0 {
		fmt.Fprintf(&b, ", naive pool %d", r.NaivePool)
	}
	fmt.Fprintf(&b, "\nmachine       %d cores; load average before %s, after %s", r.Cores, r.LoadBefore, r.LoadAfter)
	fmt.Fprintf(&b, "\nload          %.2fs from the first connection to the last", r.SendSeconds)
	fmt.Fprintf(&b, "\nacks (2xx)    %d, %.0f/s (from the database: delivery counts added; %d new events)", r.Acks, r.AckRate, r.Check.NewRows)
	if e := r.EndToEnd; e.Measured {
		fmt.Fprintf(&b, "\nend to end    %d of %d events at the sink, %.0f/s; drain %.2fs after the load stopped", e.Delivered, e.Expected, e.Rate, e.DrainSeconds)
		if !e.Drained {
			b.WriteString(" (NOT DRAINED within the timeout)")
		}
	}
	writeCPUText(&b, "cpu per ack", r.CPU, "ack")
	if e := r.EndToEnd; e.DrainDelivered > 0 {
		writeCPUText(&b, fmt.Sprintf("cpu per delivery (drain: %d events)", e.DrainDelivered), e.DrainCPU, "event")
	}
	fmt.Fprintf(&b, "\npeak rss      %.1f MiB (the server alone)", r.PeakRSSMiB)
	c := r.Check
	verdict := "PASS"
	if !c.Passed {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "\ncheck         %s: %d new rows, %d sink keys, %d repeated keys", verdict, c.NewRows, c.SinkKeys, c.SinkRepeated)
	return writeCheckDetails(w, &b, c)
}
