package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/textfield"
)

// Defaults of the rejected requests kept (the file's rejected: block).
const (
	// DefaultRejectedPerSourcePerMinute bounds the records of one source
	// (unknown sources share one bound) per minute: a flood of forged
	// requests is counted, not stored.
	DefaultRejectedPerSourcePerMinute = 60
	// DefaultRejectedRetention is how long a record is kept.
	DefaultRejectedRetention = 7 * 24 * time.Hour
	// rejectedBodyBytes is how much of a rejected body is kept.
	rejectedBodyBytes = 4 << 10
	// rejectedBuffer bounds the records waiting to be written: past it
	// (the database slow or down) they are counted and dropped, never
	// waited for on the request.
	rejectedBuffer = 1024
)

// RejectedStore keeps rejected requests (dedupe.Store).
type RejectedStore interface {
	RecordRejected(ctx context.Context, rs []dedupe.Rejected) error
	DeleteRejectedBefore(ctx context.Context, t time.Time) (int64, error)
}

// RejectedConfig tunes a RejectedRecorder.
type RejectedConfig struct {
	// PerSourcePerMinute defaults to DefaultRejectedPerSourcePerMinute.
	PerSourcePerMinute int
	// Retention defaults to DefaultRejectedRetention.
	Retention time.Duration
	Logger    *slog.Logger
	Registry  prometheus.Registerer
}

// RejectedRecorder keeps the requests the gateway rejects, off the
// request path: Note never blocks, a goroutine (Run) writes them in
// batches and deletes the old ones.
type RejectedRecorder struct {
	store RejectedStore
	cfg   RejectedConfig
	queue chan dedupe.Rejected

	mu     sync.Mutex
	minute time.Time
	counts map[string]int

	kept    prometheus.Counter
	dropped *prometheus.CounterVec
}

// NewRejectedRecorder returns a recorder writing to store; Run it.
func NewRejectedRecorder(store RejectedStore, cfg RejectedConfig) *RejectedRecorder {
	if cfg.PerSourcePerMinute <= 0 {
		cfg.PerSourcePerMinute = DefaultRejectedPerSourcePerMinute
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRejectedRetention
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := &RejectedRecorder{store: store, cfg: cfg, queue: make(chan dedupe.Rejected, rejectedBuffer), counts: map[string]int{},
		kept: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "webhookd_rejected_kept_total",
			Help: "Rejected webhook requests kept in Postgres (GET /admin/rejected).",
		}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhookd_rejected_not_kept_total",
			Help: "Rejected webhook requests counted but not kept: past rejected.per_source_per_minute (rate), the write buffer full (buffer), or the write failed (error).",
		}, []string{"reason"}),
	}
	if cfg.Registry != nil {
		cfg.Registry.MustRegister(r.kept, r.dropped)
		for _, why := range []string{"rate", "buffer", "error"} {
			r.dropped.WithLabelValues(why)
		}
	}
	return r
}

// keep notes the request req that was answered err, for the recorder:
// signatureHeader is its source's (masked in what is kept), bucket the
// name its bound is counted under ("" for an unknown source).
func (r *RejectedRecorder) keep(req *http.Request, name, bucket, signatureHeader string, status int, err error, body []byte, size int) {
	if r == nil {
		return
	}
	rj := dedupe.Rejected{
		At: time.Now(), Source: textfield.Clean(name, maxRejectedName), Remote: req.RemoteAddr, Status: status,
		Reason: textfield.Clean(err.Error(), maxRejectedReason), Body: body, BodyBytes: size,
	}
	if h, herr := storedHeaders(req.Header, signatureHeader, nil); herr == nil {
		rj.Headers = h
	}
	r.note(bucket, rj)
}

// Bounds of a kept rejected request's source name (any path segment a
// client sent) and reason.
const (
	maxRejectedName   = 128
	maxRejectedReason = 512
)

// note takes a rejected request to keep, unless its source's bound for
// this minute is reached or the buffer is full (counted either way).
// bucket is the source's name, or "" for every unknown one.
func (r *RejectedRecorder) note(bucket string, rj dedupe.Rejected) {
	if r == nil {
		return
	}
	r.mu.Lock()
	if m := rj.At.Truncate(time.Minute); !m.Equal(r.minute) {
		r.minute, r.counts = m, map[string]int{}
	}
	r.counts[bucket]++
	over := r.counts[bucket] > r.cfg.PerSourcePerMinute
	r.mu.Unlock()
	if over {
		r.dropped.WithLabelValues("rate").Inc()
		return
	}
	if len(rj.Body) > rejectedBodyBytes {
		rj.Body = rj.Body[:rejectedBodyBytes]
	}
	select {
	case r.queue <- rj:
	default:
		r.dropped.WithLabelValues("buffer").Inc()
	}
}

// Run writes what note takes, in batches, until ctx ends, and deletes
// records older than the retention every hour.
func (r *RejectedRecorder) Run(ctx context.Context) {
	tick := time.NewTicker(time.Hour)
	defer tick.Stop()
	r.expire(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			r.expire(ctx)
		case first := <-r.queue:
			batch := []dedupe.Rejected{first}
			for len(batch) < 100 {
				select {
				case rj := <-r.queue:
					batch = append(batch, rj)
					continue
				default:
				}
				break
			}
			if err := r.store.RecordRejected(ctx, batch); err != nil {
				r.dropped.WithLabelValues("error").Add(float64(len(batch)))
				r.cfg.Logger.WarnContext(ctx, "could not keep rejected requests; they are counted, not kept",
					slog.Int("requests", len(batch)), slog.String("error", err.Error()))
				continue
			}
			r.kept.Add(float64(len(batch)))
		}
	}
}

func (r *RejectedRecorder) expire(ctx context.Context) {
	if n, err := r.store.DeleteRejectedBefore(ctx, time.Now().Add(-r.cfg.Retention)); err != nil {
		r.cfg.Logger.WarnContext(ctx, "could not delete old rejected requests", slog.String("error", err.Error()))
	} else if n > 0 {
		r.cfg.Logger.InfoContext(ctx, "deleted old rejected requests", slog.Int64("requests", n))
	}
}
