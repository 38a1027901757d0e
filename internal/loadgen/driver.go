package loadgen

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/schollz/progressbar/v3"

	"github.com/webhookd/webhookd/gateway/verify"
)

// maxLatencyMicros is the histogram's ceiling; slower answers count as it.
const maxLatencyMicros = int64(120 * time.Second / time.Microsecond)

// driver sends the requests of one run.
type driver struct {
	cfg      Config
	src      Source
	url      string
	idHeader string
	client   *http.Client
	book     *book

	sent, ok, failed, errs atomic.Int64
	backlog                func() int // open loop: due requests not yet started
}

// tally is one worker's results, merged at the end.
type tally struct {
	hist     *hdrhistogram.Histogram
	codes    map[int]int64
	errors   int64
	firstErr string
}

func newTally() *tally {
	return &tally{hist: hdrhistogram.New(1, maxLatencyMicros, 3), codes: map[int]int64{}}
}

func (t *tally) merge(o *tally) {
	t.hist.Merge(o.hist)
	for c, n := range o.codes {
		t.codes[c] += n
	}
	t.errors += o.errors
	if t.firstErr == "" {
		t.firstErr = o.firstErr
	}
}

func newDriver(cfg Config, baseURL string, b *book) *driver {
	src := *cfg.Source
	d := &driver{
		cfg:  cfg,
		src:  src,
		url:  strings.TrimRight(baseURL, "/") + "/webhooks/" + src.Name,
		book: b,
		client: &http.Client{
			Timeout: 60 * time.Second,
			Transport: &http.Transport{
				DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
				MaxIdleConns:        cfg.Concurrency * 2,
				MaxIdleConnsPerHost: cfg.Concurrency * 2,
				IdleConnTimeout:     90 * time.Second,
				DisableCompression:  true,
			},
		},
		backlog: func() int { return 0 },
	}
	if name, ok := strings.CutPrefix(src.EventID, "header:"); ok {
		d.idHeader = name
	}
	return d
}

// run sends for cfg.Duration and returns the merged tally and the time
// from the first send to the last answer.
func (d *driver) run(ctx context.Context) (*tally, time.Time, time.Time) {
	ctx = pprof.WithLabels(ctx, pprof.Labels("role", "loadgen"))
	pprof.SetGoroutineLabels(ctx)
	defer pprof.SetGoroutineLabels(context.Background())

	n := d.cfg.Concurrency
	tallies := make([]*tally, n)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d.cfg.Duration)
	seed := uint64(start.UnixNano())

	var due chan time.Time
	if d.cfg.Rate > 0 {
		due = make(chan time.Time, 1<<16)
		d.backlog = func() int { return len(due) }
		go d.dispatch(ctx, start, deadline, due)
	}
	for w := range n {
		tallies[w] = newTally()
		wg.Add(1)
		go func(t *tally, r *rand.Rand) {
			defer wg.Done()
			if due != nil {
				for intended := range due {
					d.one(ctx, intended, t, r)
				}
				return
			}
			for ctx.Err() == nil {
				now := time.Now()
				if !now.Before(deadline) {
					return
				}
				d.one(ctx, now, t, r)
			}
		}(tallies[w], rand.New(rand.NewPCG(seed, uint64(w))))
	}
	wg.Wait()
	end := time.Now()
	total := newTally()
	for _, t := range tallies {
		total.merge(t)
	}
	return total, start, end
}

// dispatch emits intended send times at steady spacing until deadline.
// When every worker is busy it falls behind, and the requests it emits
// later keep their intended times: their latency includes the wait.
func (d *driver) dispatch(ctx context.Context, start, deadline time.Time, due chan<- time.Time) {
	defer close(due)
	interval := time.Duration(float64(time.Second) / d.cfg.Rate)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for i := int64(0); ; i++ {
		t := start.Add(time.Duration(i) * interval)
		if !t.Before(deadline) {
			return
		}
		if wait := time.Until(t); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return
			}
		}
		select {
		case due <- t:
		case <-ctx.Done():
			return
		}
	}
}

// one sends one request; its latency counts from intended.
func (d *driver) one(ctx context.Context, intended time.Time, t *tally, r *rand.Rand) {
	p := d.book.next(r, d.cfg.Duplicates)
	id := d.book.id(p)
	body := makeBody(id, p.n, d.cfg.BodySize)
	d.sent.Add(1)
	header, rawQuery, err := verify.Sign(d.src.Verify, body, time.Now(), id)
	if err != nil {
		d.fail(t, fmt.Errorf("error signing: %w", err))
		return
	}
	if d.idHeader != "" && header.Get(d.idHeader) == "" {
		header.Set(d.idHeader, id)
	}
	header.Set("Content-Type", "application/json")
	u := d.url
	if rawQuery != "" {
		u += "?" + rawQuery
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		d.fail(t, err)
		return
	}
	req.Header = header
	resp, err := d.client.Do(req)
	if err != nil {
		d.fail(t, err)
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	lat := time.Since(intended).Microseconds()
	_ = t.hist.RecordValue(min(max(lat, 1), maxLatencyMicros))
	t.codes[resp.StatusCode]++
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		d.book.ack(p)
		d.ok.Add(1)
		return
	}
	d.failed.Add(1)
}

func (d *driver) fail(t *tally, err error) {
	t.errors++
	if t.firstErr == "" {
		t.firstErr = err.Error()
	}
	d.errs.Add(1)
}

// progress shows a bar over the sending phase until stop is closed.
func (d *driver) progress(w io.Writer, stop <-chan struct{}) {
	bar := newBar(w, d.cfg.Duration.Milliseconds(), "sending")
	start := time.Now()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	lastOK, lastAt := int64(0), start
	for {
		select {
		case <-stop:
			_ = bar.Finish()
			_, _ = fmt.Fprintln(w)
			return
		case now := <-tick.C:
			ok := d.ok.Load()
			rate := float64(ok-lastOK) / now.Sub(lastAt).Seconds()
			lastOK, lastAt = ok, now
			desc := fmt.Sprintf("sending: %7.0f acks/s  2xx %d  other %d  errors %d", rate, ok, d.failed.Load(), d.errs.Load())
			if d.cfg.Rate > 0 {
				desc += fmt.Sprintf("  behind %d", d.backlog())
			}
			bar.Describe(desc)
			_ = bar.Set64(min(now.Sub(start).Milliseconds(), d.cfg.Duration.Milliseconds()))
		}
	}
}

// newBar returns a progress bar on w for max units (-1: a spinner).
func newBar(w io.Writer, max int64, desc string) *progressbar.ProgressBar {
	return progressbar.NewOptions64(max,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionSetWidth(24),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionShowDescriptionAtLineEnd(),
	)
}
