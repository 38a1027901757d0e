package jobs

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/tracing"
)

// RelayConfig configures the Relay.
type RelayConfig struct {
	// Linger is how long the fast path waits for more events after the
	// first of a batch before handing the batch off, unless it fills
	// first. Off the request path, it costs no acknowledgement any time;
	// at moderate rates it turns one Redis call per event or two into one
	// per batch. Defaults to 10ms.
	Linger time.Duration
	// BatchSize caps the events of one batch. One goroutine collects
	// batches, so they grow under load; each batch is enqueued in one
	// Redis round trip. Defaults to 500.
	BatchSize int
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Metrics, when set, counts failed hand-offs.
	Metrics *Metrics
	// TracerProvider, when set, gives each event handed off a
	// "webhookd.handoff" span in its trace (tracing.go); nil turns
	// tracing off.
	TracerProvider trace.TracerProvider
}

// WithDefaults returns a copy of c with zero fields set to their defaults.
func (c RelayConfig) WithDefaults() RelayConfig {
	if c.Linger <= 0 {
		c.Linger = 10 * time.Millisecond
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 500
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Relay is the hand-off's fast path: it takes events the gateway just
// committed (Notify) and enqueues their tasks in batches, off the request
// path. It is only the fast path: an event stays in the outbox until
// every destination has a run, and the Reconciler writes the task of any
// event this misses (Redis down, a process killed between commit and
// enqueue, a full channel, Redis losing the task later).
type Relay struct {
	enqueuer *Enqueuer
	marker   handOffMarker
	cfg      RelayConfig
	fast     chan notified
	tracer   trace.Tracer // nil when tracing is off
	// unmarked holds the recording transactions some of whose events
	// this relay enqueued, until it has enqueued all of them; only Run's
	// goroutine touches it.
	unmarked map[int64]*transactionHandOff
}

// relayedEvent names an event the relay was notified of.
type relayedEvent struct{ source, id string }

// transactionHandOff is what the relay enqueued of one recording
// transaction's events.
type transactionHandOff struct {
	want     int
	enqueued map[relayedEvent]bool
	since    time.Time
}

// unmarkedFor is how long the relay waits for the rest of a
// transaction's events: one whose notification was dropped (a full fast
// path, a cancelled request) never comes, and recovery hands it off.
const unmarkedFor = time.Minute

// notified is an event on the fast path, with the span context of the
// request that recorded it (invalid when tracing is off) and when.
type notified struct {
	ref  dedupe.EventRef
	span trace.SpanContext
	at   time.Time
}

// handOffMarker records in Postgres the recording transactions whose
// every event the relay enqueued; *dedupe.Store satisfies it.
type handOffMarker interface {
	MarkHandedOff(ctx context.Context, xids []int64) error
}

// NewRelay returns a Relay that marks with marker (nil: none) each
// recording transaction whose events it enqueued whole, so recovery
// counts a task it writes for an event of an unmarked one as a routine
// hand-off, not as one Redis lost; call Run to start it.
func NewRelay(enqueuer *Enqueuer, marker handOffMarker, cfg RelayConfig) *Relay {
	cfg = cfg.WithDefaults()
	return &Relay{
		enqueuer: enqueuer,
		marker:   marker,
		cfg:      cfg,
		fast:     make(chan notified, cfg.BatchSize*16),
		tracer:   tracing.Tracer(cfg.TracerProvider),
		unmarked: make(map[int64]*transactionHandOff),
	}
}

// Notify asks for a just-committed event to be enqueued, one task per
// destination of its plan. It never blocks: when the fast path is full
// the event is left to the reconciler. With tracing on, the hand-off is a
// span of the trace of ctx's span.
func (r *Relay) Notify(ctx context.Context, ref dedupe.EventRef) {
	n := notified{ref: ref}
	if r.tracer != nil {
		n.span, n.at = trace.SpanContextFromContext(ctx), time.Now()
	}
	select {
	case r.fast <- n:
	default:
	}
}

// Run hands notified events off until ctx ends, then hands what it still
// holds to the queue within a short grace period.
func (r *Relay) Run(ctx context.Context) {
	for {
		select {
		case n := <-r.fast:
			batch := r.collect(ctx, []notified{n}, r.cfg.Linger)
			if ctx.Err() != nil {
				// Stopped while lingering: the batch goes out with the rest.
				r.drainFast(batch)
				return
			}
			// A batch taken off the fast path goes out even if ctx ends
			// meanwhile (a graceful stop), within the same grace period
			// as the drain: cut off mid-call it would wait for recovery.
			grace, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			r.handOff(grace, batch)
			cancel()
		case <-ctx.Done():
			r.drainFast(nil)
			return
		}
	}
}

// drainFast hands off batch and what the fast path still holds within a
// short grace period; the reconciler finds anything this misses.
func (r *Relay) drainFast(batch []notified) {
	grace, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		batch = r.collect(grace, batch, 0)
		if len(batch) == 0 {
			return
		}
		r.handOff(grace, batch)
		batch = nil
	}
}

// collect returns batch and whatever else arrives within linger, up to
// BatchSize, each event once: the copies of one event that arrive
// together (a sender's burst of retries) are handed off once.
func (r *Relay) collect(ctx context.Context, batch []notified, linger time.Duration) []notified {
	seen := make(map[relayedEvent]bool, len(batch))
	for _, n := range batch {
		seen[relayedEvent{n.ref.Source, n.ref.ExternalID}] = true
	}
	add := func(n notified) {
		if k := (relayedEvent{n.ref.Source, n.ref.ExternalID}); !seen[k] {
			seen[k] = true
			batch = append(batch, n)
		}
	}
	// What is already waiting goes in without a timer.
waiting:
	for len(batch) < r.cfg.BatchSize {
		select {
		case n := <-r.fast:
			add(n)
		default:
			break waiting
		}
	}
	if linger <= 0 || len(batch) == 0 || len(batch) >= r.cfg.BatchSize {
		return batch
	}
	timer := time.NewTimer(linger)
	defer timer.Stop()
	for len(batch) < r.cfg.BatchSize {
		select {
		case n := <-r.fast:
			add(n)
		case <-timer.C:
			return batch
		case <-ctx.Done():
			return batch
		}
	}
	return batch
}

// handOff enqueues every destination's task of each event of batch, in
// one script call per 500 tasks. On failure the reconciler writes them
// once Redis answers.
func (r *Relay) handOff(ctx context.Context, batch []notified) {
	refs := make([]dedupe.EventRef, len(batch))
	for i, n := range batch {
		refs[i] = n.ref
	}
	unrouted, err := r.enqueuer.EnqueueEvents(ctx, refs)
	r.traceHandOff(batch, err)
	for _, ref := range unrouted {
		r.cfg.Logger.WarnContext(ctx, "event's source is not configured; not enqueued",
			slog.String("source", ref.Source), slog.String("event_id", ref.ExternalID))
	}
	if err != nil {
		r.cfg.Metrics.enqueueFailed()
		r.cfg.Logger.WarnContext(ctx, "hand-off to the queue failed; the reconciler writes the tasks once Redis answers",
			slog.Int("events", len(batch)), slog.String("error", err.Error()))
		for _, ref := range refs {
			// Its transaction is never marked: recovery hands the event off.
			delete(r.unmarked, ref.RecordXID)
		}
		return
	}
	if r.marker == nil {
		return
	}
	if err := r.marker.MarkHandedOff(ctx, r.completed(refs)); err != nil {
		// Only the loss signal's precision depends on it.
		r.cfg.Logger.DebugContext(ctx, "could not mark events handed off", slog.Int("events", len(batch)), slog.String("error", err.Error()))
	}
}

// completed counts refs, just enqueued, against their transactions and
// returns those now enqueued whole. A transaction is marked only then: a
// process stopped between two batches of one transaction leaves it
// unmarked, and recovery counts its tasks as routine hand-offs, never
// as tasks Redis lost.
func (r *Relay) completed(refs []dedupe.EventRef) []int64 {
	now := time.Now()
	var done []int64
	for _, ref := range refs {
		if ref.RecordXID == 0 || ref.RecordedWith <= 0 {
			continue
		}
		t := r.unmarked[ref.RecordXID]
		if t == nil {
			t = &transactionHandOff{want: ref.RecordedWith, enqueued: make(map[relayedEvent]bool, ref.RecordedWith), since: now}
			r.unmarked[ref.RecordXID] = t
		}
		t.enqueued[relayedEvent{ref.Source, ref.ExternalID}] = true
		if len(t.enqueued) >= t.want {
			done = append(done, ref.RecordXID)
			delete(r.unmarked, ref.RecordXID)
		}
	}
	for xid, t := range r.unmarked {
		if now.Sub(t.since) > unmarkedFor {
			delete(r.unmarked, xid)
		}
	}
	return done
}
