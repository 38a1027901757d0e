package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/webhookd/webhookd/dedupe"
)

// relayStore is what the relay needs from dedupe.Store.
type relayStore interface {
	MarkEnqueued(ctx context.Context, refs []dedupe.EventRef) error
	RelayPending(ctx context.Context, limit int, minAge time.Duration,
		enqueue func(context.Context, []dedupe.EventRef) []dedupe.EventRef) (int, error)
	PendingCount(ctx context.Context) (int64, error)
}

// RelayConfig configures the Relay.
type RelayConfig struct {
	// Interval between scans for pending events. Defaults to 2s.
	Interval time.Duration
	// MinAge leaves events younger than this to the fast path. Defaults to 2s.
	MinAge time.Duration
	// Linger is how long the fast path waits for more events after the
	// first of a batch before handing the batch off, unless it fills
	// first. Off the request path, it costs no acknowledgement any time;
	// at moderate rates it turns one mark statement and one Redis call
	// per event or two into one per batch. Defaults to 10ms.
	Linger time.Duration
	// BatchSize caps the events handled per scan or per fast-path batch.
	// One goroutine collects fast-path batches, so they grow under load;
	// each batch is enqueued in one Redis round trip and marked enqueued
	// in one statement. Defaults to 500.
	BatchSize int
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Metrics, when set, counts relayed events and the backlog.
	Metrics *Metrics
	// LossCheck, when set, runs before each scan so events whose tasks
	// Redis lost are relayed again.
	LossCheck *QueueLossCheck
}

// WithDefaults returns a copy of c with zero fields set to their defaults.
func (c RelayConfig) WithDefaults() RelayConfig {
	if c.Interval <= 0 {
		c.Interval = 2 * time.Second
	}
	if c.MinAge <= 0 {
		c.MinAge = 2 * time.Second
	}
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

// Relay hands recorded events to the queue. The fast path takes events
// the gateway just committed (Notify) and enqueues them in batches off the
// request path; the scan finds events whose hand-off never happened (Redis
// down, a process killed between commit and enqueue, a full fast path)
// and enqueues them. Both mark events enqueued in batches. Every replica
// may run a Relay: task ids are keys, and the scan skips rows another
// replica holds.
type Relay struct {
	store    relayStore
	enqueuer *Enqueuer
	cfg      RelayConfig
	fast     chan dedupe.EventRef
}

// NewRelay returns a Relay; call Run to start it.
func NewRelay(store relayStore, enqueuer *Enqueuer, cfg RelayConfig) *Relay {
	cfg = cfg.WithDefaults()
	return &Relay{
		store:    store,
		enqueuer: enqueuer,
		cfg:      cfg,
		fast:     make(chan dedupe.EventRef, cfg.BatchSize*16),
	}
}

// Notify asks for a just-committed event to be enqueued. It never blocks:
// when the fast path is full the event is left to the scan.
func (r *Relay) Notify(source, eventID string) {
	select {
	case r.fast <- dedupe.EventRef{Source: source, ExternalID: eventID}:
	default:
	}
}

// Run runs the fast path and the scan until ctx ends, then hands what the
// fast path still holds to the queue within a short grace period.
func (r *Relay) Run(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.fastPath(ctx)
	}()
	r.scanLoop(ctx)
	<-done
}

func (r *Relay) fastPath(ctx context.Context) {
	for {
		select {
		case ref := <-r.fast:
			batch := r.collect(ctx, ref, r.cfg.Linger)
			if ctx.Err() != nil {
				// Stopped while lingering: the batch goes out with the rest.
				r.drainFast(batch)
				return
			}
			r.handOff(ctx, batch)
		case <-ctx.Done():
			r.drainFast(nil)
			return
		}
	}
}

// drainFast hands off batch and what the fast path still holds within a
// short grace period; the scan finds anything this misses at the next
// start.
func (r *Relay) drainFast(batch []dedupe.EventRef) {
	grace, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if len(batch) > 0 {
		r.handOff(grace, batch)
	}
	for {
		select {
		case ref := <-r.fast:
			r.handOff(grace, r.collect(grace, ref, 0))
		default:
			return
		}
	}
}

// collect returns first and whatever else arrives within linger, up to
// BatchSize, each event once: the copies of one event that arrive
// together (a sender's burst of retries) are handed off once.
func (r *Relay) collect(ctx context.Context, first dedupe.EventRef, linger time.Duration) []dedupe.EventRef {
	batch := []dedupe.EventRef{first}
	seen := map[dedupe.EventRef]bool{first: true}
	add := func(ref dedupe.EventRef) {
		if !seen[ref] {
			seen[ref] = true
			batch = append(batch, ref)
		}
	}
	// What is already waiting goes in without a timer.
waiting:
	for len(batch) < r.cfg.BatchSize {
		select {
		case ref := <-r.fast:
			add(ref)
		default:
			break waiting
		}
	}
	if linger <= 0 || len(batch) >= r.cfg.BatchSize {
		return batch
	}
	timer := time.NewTimer(linger)
	defer timer.Stop()
	for len(batch) < r.cfg.BatchSize {
		select {
		case ref := <-r.fast:
			add(ref)
		case <-timer.C:
			return batch
		case <-ctx.Done():
			return batch
		}
	}
	return batch
}

func (r *Relay) handOff(ctx context.Context, batch []dedupe.EventRef) {
	done := r.enqueueAll(ctx, batch)
	if len(done) == 0 {
		return
	}
	if err := r.store.MarkEnqueued(context.WithoutCancel(ctx), done); err != nil {
		// Harmless: the scan finds them, and enqueuing again is a no-op.
		r.cfg.Logger.WarnContext(ctx, "could not mark events enqueued", slog.String("error", err.Error()), slog.Int("events", len(done)))
	}
}

// enqueueAll enqueues every destination's task of each event and returns
// the events whose tasks are all queued: all of them, or none when Redis
// failed (the scan retries them).
func (r *Relay) enqueueAll(ctx context.Context, refs []dedupe.EventRef) []dedupe.EventRef {
	unrouted, err := r.enqueuer.EnqueueEvents(ctx, refs)
	for _, ref := range unrouted {
		// The source was removed from the configuration: nothing will
		// ever route it, so it is marked and not relayed again.
		r.cfg.Logger.WarnContext(ctx, "event's source is not configured; not relayed",
			slog.String("source", ref.Source), slog.String("event_id", ref.ExternalID))
	}
	if err != nil {
		r.cfg.Metrics.enqueueFailed()
		r.cfg.Logger.WarnContext(ctx, "hand-off to the queue failed; the relay will retry",
			slog.Int("events", len(refs)), slog.String("error", err.Error()))
		return nil
	}
	return refs
}

func (r *Relay) scanLoop(ctx context.Context) {
	ticker := time.NewTicker(r.cfg.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		if r.cfg.LossCheck != nil {
			if _, err := r.cfg.LossCheck.Check(ctx); err != nil && ctx.Err() == nil {
				r.cfg.Logger.WarnContext(ctx, "queue loss check failed", slog.String("error", err.Error()))
			}
		}
		if err := untilShort(ctx, r.cfg.BatchSize, r.ScanOnce); err != nil && ctx.Err() == nil {
			r.cfg.Logger.WarnContext(ctx, "relay scan failed", slog.String("error", err.Error()))
		}
		if n, err := r.store.PendingCount(ctx); err == nil {
			r.cfg.Metrics.backlog(n)
		}
	}
}

// ScanOnce enqueues one batch of pending events older than MinAge and
// returns how many it handed off.
func (r *Relay) ScanOnce(ctx context.Context) (int, error) {
	n, err := r.store.RelayPending(ctx, r.cfg.BatchSize, r.cfg.MinAge, r.enqueueAll)
	if err != nil {
		return 0, err
	}
	if n > 0 {
		r.cfg.Metrics.relayedEvents(n)
		r.cfg.Logger.InfoContext(ctx, "relay enqueued pending events", slog.Int("events", n))
	}
	return n, nil
}

// untilShort runs once until a batch comes back smaller than batch (the
// backlog is drained) or fails.
func untilShort(ctx context.Context, batch int, once func(context.Context) (int, error)) error {
	for {
		n, err := once(ctx)
		if err != nil || n < batch {
			return err
		}
	}
}
