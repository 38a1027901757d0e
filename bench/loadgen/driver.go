package loadgen

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/schollz/progressbar/v3"
	"github.com/valyala/fasthttp"
)

// maxLatencyMicros is the histogram's ceiling; slower answers count as it.
const maxLatencyMicros = int64(120 * time.Second / time.Microsecond)

// requestTimeout bounds one request, from waiting for a connection to the
// last byte of the answer.
const requestTimeout = 60 * time.Second

// driver sends the requests of one run.
type driver struct {
	cfg    Config
	src    Source
	badSrc Source // src signing with a secret the gateway does not know
	url    string
	client *fasthttp.Client
	book   *book

	sent, ok, failed, errs, bad atomic.Int64
	backlog                     func() int // open loop: due requests not yet started
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
	badSrc := src
	badSrc.Verify.Secrets = []string{"whsec_bm90IHRoZSBnYXRld2F5J3Mgc2VjcmV0IGF0IGFsbA=="}
	d := &driver{
		cfg:    cfg,
		src:    src,
		badSrc: badSrc,
		url:    strings.TrimRight(baseURL, "/") + "/webhooks/" + src.Name,
		book:   b,
		// fasthttp's client sends and reads in the calling goroutine, with
		// no per-connection goroutines: the generator shares the machine it
		// measures, so its own cost per request is kept small (cheaper than
		// net/http's client; docs/performance.md).
		client: &fasthttp.Client{
			MaxConnsPerHost:          cfg.Concurrency * 2,
			MaxConnWaitTimeout:       requestTimeout,
			MaxIdleConnDuration:      90 * time.Second,
			ReadTimeout:              requestTimeout,
			WriteTimeout:             requestTimeout,
			NoDefaultUserAgentHeader: true,
			Dial:                     (&fasthttp.TCPDialer{Concurrency: cfg.Concurrency * 2}).Dial,
		},
		backlog: func() int { return 0 },
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
					d.one(intended, t, r)
				}
				return
			}
			for ctx.Err() == nil {
				now := time.Now()
				if !now.Before(deadline) {
					return
				}
				d.one(now, t, r)
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
func (d *driver) one(intended time.Time, t *tally, r *rand.Rand) {
	if d.cfg.BadSignatures > 0 && r.Float64() < d.cfg.BadSignatures {
		n := d.bad.Add(1)
		d.send(intended, t, d.badSrc, fmt.Sprintf("evt_bad_%d", n), n, nil)
		return
	}
	p := d.book.next(r, d.cfg.Duplicates)
	d.send(intended, t, d.src, d.book.id(p), p.n, &p)
}

// send sends event id (number n) signed by src; p, when set, is the
// book's entry, acknowledged on a 2xx.
func (d *driver) send(intended time.Time, t *tally, src Source, id string, n int64, p *pick) {
	body := makeBody(id, n, d.cfg.BodySize)
	d.sent.Add(1)
	header, rawQuery, err := src.sign(id, body, time.Now())
	if err != nil {
		d.fail(t, err)
		return
	}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	if rawQuery != "" {
		req.SetRequestURI(d.url + "?" + rawQuery)
	} else {
		req.SetRequestURI(d.url)
	}
	req.Header.SetMethod(http.MethodPost)
	for name, values := range header {
		for _, v := range values {
			req.Header.Add(name, v)
		}
	}
	req.Header.SetContentType("application/json")
	req.SetBodyRaw(body)
	if err := d.client.DoTimeout(req, resp, requestTimeout); err != nil {
		d.fail(t, err)
		return
	}
	code := resp.StatusCode()
	t.codes[code]++
	if p == nil {
		// A rejected request's answer is not an ack: the latency
		// figures stay those of the requests the gateway keeps.
		d.failed.Add(1)
		return
	}
	lat := time.Since(intended).Microseconds()
	_ = t.hist.RecordValue(min(max(lat, 1), maxLatencyMicros))
	if code >= 200 && code < 300 {
		d.book.ack(*p)
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
