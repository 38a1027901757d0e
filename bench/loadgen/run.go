package loadgen

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhookd/webhookd/internal/sink"
	"github.com/webhookd/webhookd/jobs"
)

// Run prepares the environment (unless cfg.Target is set), sends for
// cfg.Duration, waits for the queue to drain, checks exactly-once and
// returns the report. An error means the run could not be made; a failed
// check is reported in Report.Check, not as an error.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	src := *cfg.Source
	rep := &Report{
		Label:           cfg.Label,
		Mode:            "webhookd",
		Loop:            "closed",
		Concurrency:     cfg.Concurrency,
		Rate:            cfg.Rate,
		DurationSeconds: cfg.Duration.Seconds(),
		Duplicates:      cfg.Duplicates,
		BodySize:        cfg.BodySize,
		Scheme:          src.Verify.Scheme,
		Preload:         cfg.Preload,
		Cores:           runtime.NumCPU(),
	}
	switch {
	case cfg.Target != "":
		rep.Mode = "target"
	case cfg.Naive:
		rep.Mode = "naive"
		rep.NaivePool = cfg.NaivePool
	}
	if cfg.NoWorker {
		rep.Mode += " (no worker)"
	}
	if cfg.Rate > 0 {
		rep.Loop = "open"
	}

	var (
		pool     *pgxpool.Pool
		sv       sinkView
		baseURL  = cfg.Target
		baseSink int64
	)
	if cfg.Target == "" {
		sys, err := startSystem(ctx, cfg)
		defer sys.close()
		if err != nil {
			return nil, err
		}
		pool, sv, baseURL = sys.pool, sys.sink, sys.url
		cfg.Preload, rep.Preload = sys.preload, sys.preload
	} else {
		if cfg.DatabaseURL != "" {
			var err error
			if pool, err = openPool(ctx, cfg.DatabaseURL); err != nil {
				return nil, err
			}
			defer pool.Close()
		}
		if cfg.SinkURL != "" {
			sv = remoteSink{url: cfg.SinkURL}
			st, err := sv.stats(ctx)
			if err != nil {
				return nil, err
			}
			baseSink = int64(st.Keys)
		}
	}
	var baseRows int64
	if pool != nil {
		var err error
		if baseRows, err = countRows(ctx, pool, src.Name); err != nil {
			return nil, err
		}
	}
	if err := waitHealthy(ctx, baseURL); err != nil {
		return nil, err
	}

	// Send.
	b := newBook(randomHex(4), cfg.Preload)
	d := newDriver(cfg, baseURL, b)
	rep.LoadBefore = loadAverage()
	resetPeakRSS()
	database := ""
	if cc, err := pgx.ParseConfig(cfg.DatabaseURL); err == nil && cfg.DatabaseURL != "" {
		database = cc.Database
	}
	procs0 := readProcs(database)
	cpu0 := readCPU()
	if cfg.CPUProfile != nil {
		if err := pprof.StartCPUProfile(cfg.CPUProfile); err != nil {
			return nil, fmt.Errorf("error starting the cpu profile: %w", err)
		}
	}
	stopBar := make(chan struct{})
	barDone := make(chan struct{})
	if cfg.Progress != nil {
		go func() { defer close(barDone); d.progress(cfg.Progress, stopBar) }()
	} else {
		close(barDone)
	}
	smp := startSampler(ctx, sv, baseSink, d.ok.Load)
	defer smp.halt()
	t, start, end := d.run(ctx)
	close(stopBar)
	<-barDone
	if cfg.CPUProfile != nil {
		pprof.StopCPUProfile()
	}
	cpu1 := readCPU()
	procs1 := readProcs(database)
	sentSink := int64(-1) // keys at the sink when sending stopped
	if sv != nil {
		if st, err := sv.stats(ctx); err == nil {
			sentSink = int64(st.Keys)
		}
	}
	backlog, pending, active := queueState(ctx, pool, cfg)
	rep.PeakRSSMiB = float64(peakRSS()) / (1 << 20)
	rep.LoadAfter = loadAverage()
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	rep.Requests = d.sent.Load()
	rep.SendSeconds = end.Sub(start).Seconds()
	rep.StatusCodes = map[string]int64{}
	for code, n := range t.codes {
		rep.StatusCodes[strconv.Itoa(code)] = n
		if code >= 200 && code < 300 {
			rep.Acks += n
		}
	}
	rep.AckRate = float64(rep.Acks) / rep.SendSeconds
	rep.TransportErrors = t.errors
	rep.FirstError = t.firstErr
	ms := func(us int64) float64 { return float64(us) / 1000 }
	rep.Latency = Latency{
		P50: ms(t.hist.ValueAtQuantile(50)), P90: ms(t.hist.ValueAtQuantile(90)),
		P99: ms(t.hist.ValueAtQuantile(99)), P999: ms(t.hist.ValueAtQuantile(99.9)),
		Max: ms(t.hist.Max()), Mean: t.hist.Mean() / 1000,
	}
	rep.LatencyHistogram = latencyBins(t.hist)
	rep.CPU = cpuOver(cpu0, cpu1, procs0, procs1, rep.Acks, rep.SendSeconds)

	// Drain and check.
	var newRows int64 = -1
	if pool != nil {
		n, err := countRows(ctx, pool, src.Name)
		if err != nil {
			return nil, err
		}
		newRows = n - baseRows
	}
	rep.Check.DistinctSent = int64(len(b.sent))
	for _, a := range b.acked {
		if a > 0 {
			rep.Check.DistinctAcked++
		}
	}
	expected := newRows
	if expected < 0 {
		expected = rep.Check.DistinctAcked
	}
	if sv != nil {
		rep.EndToEnd = drain(ctx, sv, baseSink, expected, start, end, cfg.DrainTimeout, cfg.Progress)
		rep.EndToEnd.OutboxBacklog, rep.EndToEnd.QueuePending, rep.EndToEnd.QueueActive = backlog, pending, active
		// Only delivery runs while draining: the relay, the worker,
		// Asynq, Postgres, Redis and the sink. Its CPU per event
		// delivered meanwhile is the delivery cost.
		cpu2, procs2 := readCPU(), readProcs(database)
		if sentSink >= 0 {
			if during := baseSink + rep.EndToEnd.Delivered - sentSink; during > 0 {
				rep.EndToEnd.DrainDelivered = during
				rep.EndToEnd.DrainCPU = cpuOver(cpu1, cpu2, procs1, procs2, during, time.Since(end).Seconds())
			}
		}
	}
	rep.Timeline = smp.finish(ctx, start, end)
	check(ctx, &rep.Check, pool, sv, baseSink, b, src, newRows)
	return rep, nil
}

// cpuOver is the CPU used between two readings, per event (events in
// the window) and in cores (seconds long).
func cpuOver(cpu0, cpu1 cpuSample, procs0, procs1 procTicks, events int64, seconds float64) CPU {
	var c CPU
	if !cpu0.ok || !cpu1.ok {
		return c
	}
	tickUS := float64(time.Second/time.Microsecond) / clockTicks
	busy := float64(cpu1.machineBusy - cpu0.machineBusy)
	proc := float64(cpu1.process - cpu0.process)
	if events > 0 {
		c.MachineMicrosPerAck = busy * tickUS / float64(events)
		c.ProcessMicrosPerAck = proc * tickUS / float64(events)
	}
	if total := float64(cpu1.machineTotal - cpu0.machineTotal); total > 0 {
		c.MachineBusyPercent = 100 * busy / total
	}
	c.ProcessCores = proc / clockTicks / seconds
	groups := cpuByGroup(procs0, procs1)
	// Processes that ended during the run (compilers, tests of others)
	// took their ticks with them: "other" is the rest of the machine's
	// busy time.
	known := int64(0)
	for name, t := range groups {
		if name != "other" {
			known += t
		}
	}
	groups["other"] = max(0, cpu1.machineBusy-cpu0.machineBusy-known)
	names := slices.Sorted(maps.Keys(groups))
	slices.SortStableFunc(names, func(a, b string) int { return cmp.Compare(groups[b], groups[a]) })
	for _, name := range names {
		g := CPUGroup{Name: name, Cores: float64(groups[name]) / clockTicks / seconds}
		if events > 0 {
			g.MicrosPerAck = float64(groups[name]) * tickUS / float64(events)
		}
		c.Groups = append(c.Groups, g)
	}
	return c
}

// queueState reads the outbox backlog and the queue's pending and active
// tasks; -1 for what cannot be read.
func queueState(ctx context.Context, pool *pgxpool.Pool, cfg Config) (backlog, pending, active int64) {
	backlog, pending, active = -1, -1, -1
	if pool != nil {
		_ = pool.QueryRow(ctx, `SELECT count(*) FROM event_outbox`).Scan(&backlog)
	}
	if cfg.Target != "" {
		return backlog, pending, active
	}
	opt, err := asynq.ParseRedisURI(cfg.RedisURL)
	if err != nil {
		return backlog, pending, active
	}
	in := asynq.NewInspector(opt)
	defer in.Close()
	if qi, err := in.GetQueueInfo(cfg.Queue); err == nil {
		pending, active = int64(qi.Pending), int64(qi.Active)
	}
	return backlog, pending, active
}

func openPool(ctx context.Context, url string) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("error parsing database url: %w", err)
	}
	pc.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("error opening pool: %w", err)
	}
	return pool, nil
}

func countRows(ctx context.Context, pool *pgxpool.Pool, source string) (int64, error) {
	var n int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE source = $1`, source).Scan(&n); err != nil {
		return 0, fmt.Errorf("error counting events: %w", err)
	}
	return n, nil
}

func waitHealthy(ctx context.Context, base string) error {
	deadline := time.Now().Add(30 * time.Second)
	url := strings.TrimRight(base, "/") + "/healthz"
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer 200 within 30s (last error: %v)", url, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// sinkView reads the destination's counts.
type sinkView interface {
	stats(ctx context.Context) (sink.Stats, error)
	// keys returns the distinct keys seen, read more cheaply than stats
	// where the sink allows it.
	keys(ctx context.Context) (int64, error)
	// count returns the calls for key; ok is false when only totals can
	// be read.
	count(key string) (n int, ok bool)
}

type localSink struct{ s *sink.Sink }

func (l localSink) stats(context.Context) (sink.Stats, error) { return l.s.Stats(), nil }
func (l localSink) count(key string) (int, bool)              { return l.s.Count(key), true }
func (l localSink) keys(context.Context) (int64, error)       { return int64(l.s.Keys()), nil }

type remoteSink struct{ url string }

func (r remoteSink) stats(ctx context.Context) (sink.Stats, error) {
	var st sink.Stats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(r.url, "/")+"/stats", nil)
	if err != nil {
		return st, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, fmt.Errorf("error reading sink stats: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("error reading sink stats: status %d", resp.StatusCode)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

func (remoteSink) count(string) (int, bool) { return 0, false }

func (r remoteSink) keys(ctx context.Context) (int64, error) {
	st, err := r.stats(ctx)
	return int64(st.Keys), err
}

// drain waits until the sink has seen expected new keys (or timeout) and
// reports the end-to-end figures.
func drain(ctx context.Context, sv sinkView, base, expected int64, start, end time.Time, timeout time.Duration, progress io.Writer) EndToEnd {
	e := EndToEnd{Measured: true, Expected: expected}
	deadline := time.Now().Add(timeout)
	var bar interface {
		Set64(int64) error
		Finish() error
	}
	if progress != nil && expected > 0 {
		bar = newBar(progress, expected, "draining to the sink")
	}
	var st sink.Stats
	for {
		var err error
		st, err = sv.stats(ctx)
		if err == nil {
			e.Delivered = int64(st.Keys) - base
			if bar != nil {
				_ = bar.Set64(min(e.Delivered, expected))
			}
			if e.Delivered >= expected {
				break
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if bar != nil {
		_ = bar.Finish()
		_, _ = fmt.Fprintln(progress)
	}
	e.Drained = e.Delivered >= expected
	if e.Delivered > 0 && !st.Last.IsZero() {
		e.DrainSeconds = max(0, st.Last.Sub(end).Seconds())
		e.Rate = float64(e.Delivered) / st.Last.Sub(start).Seconds()
	}
	return e
}

// check runs the exactly-once check into c. newRows is -1 without a
// database.
func check(ctx context.Context, c *Check, pool *pgxpool.Pool, sv sinkView, baseSink int64, b *book, src Source, newRows int64) {
	allAcked := c.DistinctAcked == c.DistinctSent
	if pool == nil {
		c.Skipped = append(c.Skipped, "events table (no database)")
	} else {
		c.NewRows = newRows
		switch {
		case allAcked && newRows != c.DistinctSent:
			c.fail("events table grew by %d rows for %d distinct new ids sent (all acknowledged)", newRows, c.DistinctSent)
		case newRows < c.DistinctAcked || newRows > c.DistinctSent:
			c.fail("events table grew by %d rows, outside [%d acknowledged, %d sent] distinct new ids", newRows, c.DistinctAcked, c.DistinctSent)
		}
		if err := checkDeliveries(ctx, c, pool, b, src.Name); err != nil {
			c.fail("could not read delivery counts: %v", err)
		}
	}
	if sv == nil {
		c.Skipped = append(c.Skipped, "sink (none to read, or no worker)")
	} else if checkSink(ctx, c, sv, baseSink, newRows) {
		if _, ok := sv.count(""); ok {
			for n, a := range b.acked {
				if a == 0 {
					continue
				}
				key := jobs.Key(src.Name, src.Destination, b.id(pick{n: int64(n)}), 1)
				if got, _ := sv.count(key); got != 1 {
					if c.KeysNotOnce == 0 {
						c.fail("acknowledged event's key %s reached the sink %d times", key, got)
					}
					c.KeysNotOnce++
				}
			}
		} else {
			c.Skipped = append(c.Skipped, "per-key sink counts (remote sink gives totals only)")
		}
	}
	c.Passed = len(c.Problems) == 0
}

// checkSink checks that the sink saw one key per new event (newRows, -1
// unknown) and none twice; false when it could not be read.
func checkSink(ctx context.Context, c *Check, sv sinkView, baseSink, newRows int64) bool {
	st, err := sv.stats(ctx)
	if err != nil {
		c.fail("could not read the sink: %v", err)
		return false
	}
	c.SinkKeys = int64(st.Keys) - baseSink
	c.SinkRepeated = len(st.Repeated)
	for k, n := range st.Repeated {
		c.fail("%d keys reached the sink more than once (e.g. %s: %d calls)", c.SinkRepeated, k, n)
		break
	}
	if newRows >= 0 && c.SinkKeys != newRows {
		c.fail("the sink saw %d keys for %d new events", c.SinkKeys, newRows)
	}
	return true
}

// checkDeliveries compares each touched event's stored delivery count
// with the copies sent: equal when every copy was acknowledged, else
// between the acknowledged and the sent copies. Preloaded events start
// at 1.
func checkDeliveries(ctx context.Context, c *Check, pool *pgxpool.Pool, b *book, source string) error {
	type want struct{ base, acked, sent int64 }
	ids := make([]string, 0, len(b.sent)+len(b.preSent))
	wants := make(map[string]want, cap(ids))
	for n, s := range b.sent {
		id := b.id(pick{n: int64(n)})
		ids = append(ids, id)
		wants[id] = want{0, int64(b.acked[n]), int64(s)}
	}
	c.RepeatedPreloaded = int64(len(b.preSent))
	for n, s := range b.preSent {
		id := b.id(pick{pre: true, n: n})
		ids = append(ids, id)
		wants[id] = want{1, int64(b.preAcked[n]), int64(s)}
	}
	found := make(map[string]int64, len(ids))
	const chunk = 10000
	for i := 0; i < len(ids); i += chunk {
		rows, err := pool.Query(ctx, `SELECT external_id, deliveries FROM event_deliveries WHERE source = $1 AND external_id = ANY($2)`,
			source, ids[i:min(i+chunk, len(ids))])
		if err != nil {
			return err
		}
		var (
			id string
			d  int64
		)
		_, err = pgx.ForEachRow(rows, []any{&id, &d}, func() error { found[id] = d; return nil })
		if err != nil {
			return err
		}
	}
	for _, id := range ids {
		w := wants[id]
		d, ok := found[id]
		if !ok {
			if w.acked > 0 || w.base > 0 {
				if c.DeliveryMismatches == 0 {
					c.fail("event %s was acknowledged but is not stored", id)
				}
				c.DeliveryMismatches++
			}
			continue
		}
		got := d - w.base
		if got < w.acked || got > w.sent {
			if c.DeliveryMismatches == 0 {
				c.fail("event %s has %d deliveries; %d copies sent, %d acknowledged (base %d)", id, d, w.sent, w.acked, w.base)
			}
			c.DeliveryMismatches++
		}
	}
	if c.DeliveryMismatches > 1 {
		c.Problems[len(c.Problems)-1] += fmt.Sprintf(" (and %d more)", c.DeliveryMismatches-1)
	}
	return nil
}
