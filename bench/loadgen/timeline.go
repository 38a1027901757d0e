package loadgen

import (
	"context"
	"runtime/pprof"
	"sync"
	"time"
)

// Timeline is the run over time: cumulative acks and deliveries read at a
// steady interval from the first send to the end of the drain, so rates
// over the run can be drawn again from a stored report.
type Timeline struct {
	// IntervalSeconds is the sampling interval (see sampleInterval).
	IntervalSeconds float64 `json:"interval_seconds"`
	// SendingStoppedSeconds is when the last answer came, in seconds
	// from the first send.
	SendingStoppedSeconds float64 `json:"sending_stopped_seconds"`
	// Samples are the readings, oldest first; the last is taken when the
	// drain ended (or, with nothing delivered to watch, when sending
	// stopped), so its counts are the report's totals.
	Samples []Sample `json:"samples"`
}

// Sample is one reading of the run's cumulative counts.
type Sample struct {
	// Seconds is the time since the first send.
	Seconds float64 `json:"t_seconds"`
	// Acks counts the 2xx answers so far.
	Acks int64 `json:"acks"`
	// Delivered counts the new keys at the sink so far; absent when no
	// sink is read (no worker, or --target without --sink-url).
	Delivered *int64 `json:"delivered,omitempty"`
}

// sampleInterval is how often the timeline is read: every 250 ms, which
// gives a 15 s run 60 points, enough to see the ramp-up and the drain's
// tail, at the cost of an atomic load and a mutex-guarded len per
// tick. A remote sink is read once a second instead: each read is an
// HTTP call whose /stats walks every key the sink holds.
func sampleInterval(sv sinkView) time.Duration {
	if _, remote := sv.(remoteSink); remote {
		return time.Second
	}
	return 250 * time.Millisecond
}

// sampler reads the counts on a ticker in one goroutine until finish.
type sampler struct {
	acks      func() int64
	delivered func(ctx context.Context) (int64, bool)
	stop      chan struct{}
	stopOnce  sync.Once
	done      chan struct{}
	interval  time.Duration

	mu       sync.Mutex
	readings []reading
}

type reading struct {
	at           time.Time
	acks         int64
	delivered    int64
	hasDelivered bool
}

// startSampler starts reading acks, and the new keys at sv beyond base
// when sv is not nil, every sampleInterval(sv).
func startSampler(ctx context.Context, sv sinkView, base int64, acks func() int64) *sampler {
	s := &sampler{acks: acks, stop: make(chan struct{}), done: make(chan struct{}), interval: sampleInterval(sv)}
	if sv != nil {
		s.delivered = func(ctx context.Context) (int64, bool) {
			n, err := sv.keys(ctx)
			return n - base, err == nil
		}
	}
	s.read(ctx)
	// The generator's label keeps the sampler out of a server-only
	// profile (pprof -tagignore role=loadgen), as the driver's sends are.
	go pprof.Do(ctx, pprof.Labels("role", "loadgen"), func(ctx context.Context) {
		defer close(s.done)
		tick := time.NewTicker(s.interval)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				s.read(ctx)
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			}
		}
	})
	return s
}

func (s *sampler) read(ctx context.Context) {
	r := reading{at: time.Now(), acks: s.acks()}
	if s.delivered != nil {
		r.delivered, r.hasDelivered = s.delivered(ctx)
	}
	s.mu.Lock()
	s.readings = append(s.readings, r)
	s.mu.Unlock()
}

// finish stops the sampler, takes a last reading and returns the
// timeline, its times counted from start (the first send); stopped is
// when sending stopped.
func (s *sampler) finish(ctx context.Context, start, stopped time.Time) Timeline {
	s.halt()
	s.read(ctx)
	tl := Timeline{
		IntervalSeconds:       s.interval.Seconds(),
		SendingStoppedSeconds: roundMillis(stopped.Sub(start).Seconds()),
		Samples:               make([]Sample, 0, len(s.readings)),
	}
	for _, r := range s.readings {
		smp := Sample{Seconds: roundMillis(max(0, r.at.Sub(start).Seconds())), Acks: r.acks}
		if r.hasDelivered {
			smp.Delivered = &r.delivered
		}
		tl.Samples = append(tl.Samples, smp)
	}
	return tl
}

// halt stops the sampler's goroutine and waits for it; a run that ends
// early defers it, and finish calls it.
func (s *sampler) halt() {
	s.stopOnce.Do(func() { close(s.stop) })
	<-s.done
}

// roundMillis rounds seconds to the millisecond, which keeps the JSON
// short; the ticker's jitter is larger.
func roundMillis(seconds float64) float64 {
	return float64(time.Duration(seconds*float64(time.Second)).Round(time.Millisecond)) / float64(time.Second)
}
