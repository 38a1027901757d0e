package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/webhookd/webhookd/dedupe"
)

// destinationStore is what Destinations needs from dedupe.Store.
type destinationStore interface {
	PauseDestination(ctx context.Context, source, destination, by, reason string) (bool, error)
	ResumeDestination(ctx context.Context, source, destination string) (bool, error)
	PausedDestinations(ctx context.Context) ([]dedupe.Pause, error)
}

// DestinationsConfig configures Destinations.
type DestinationsConfig struct {
	// Interval is how often the pauses are read from Postgres (and the
	// state metrics refreshed): a pause reaches every process within it.
	// Defaults to 2s.
	Interval time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Metrics, when set, receives each destination's state and calls in
	// flight.
	Metrics *Metrics
	// RateWaiters is how many calls of one rate-limited destination this
	// process's worker may keep waiting for their turn; the others are
	// held, so a destination's backlog never takes every worker (and the
	// queue behind it, other tenants' calls included, keeps moving).
	// Defaults to 8; the assembly gives half the worker's concurrency.
	RateWaiters int
}

// Destinations is the operator's control of the configured destinations:
// which are paused (kept in Postgres, so a pause survives restarts and
// reaches every process), their steering state (Steering), pause and
// resume. Its Steering is the one the worker's handler asks.
type Destinations struct {
	store    destinationStore
	steering *Steering
	routes   RouteSource
	cfg      DestinationsConfig

	mu     sync.RWMutex
	paused map[destinationRef]dedupe.Pause
	// held are the destinations paused or open as of the last read.
	held []dedupe.HeldDestination
}

type destinationRef struct{ source, destination string }

// NewDestinations returns the destinations of routes, with a Steering on
// enqueuer's Redis. Call Run to keep the pauses current.
func NewDestinations(store destinationStore, enqueuer *Enqueuer, routes RouteSource, cfg DestinationsConfig) *Destinations {
	if cfg.Interval <= 0 {
		cfg.Interval = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	d := &Destinations{store: store, routes: routes, cfg: cfg, paused: map[destinationRef]dedupe.Pause{}}
	d.steering = NewSteering(enqueuer, d.Paused)
	if cfg.RateWaiters > 0 {
		d.steering.rateWaiters = cfg.RateWaiters
	}
	return d
}

// Steering returns the Steering that holds calls of paused, open or
// limited destinations.
func (d *Destinations) Steering() *Steering { return d.steering }

// Paused reports whether destination of source is paused, as of the last
// read.
func (d *Destinations) Paused(source, destination string) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	_, ok := d.paused[destinationRef{source, destination}]
	return ok
}

// Run reads the pauses and refreshes the state metrics every Interval
// until ctx ends.
func (d *Destinations) Run(ctx context.Context) {
	ticker := time.NewTicker(d.cfg.Interval)
	defer ticker.Stop()
	for {
		d.steering.publishInFlight(ctx, 3*d.cfg.Interval)
		// List reads the pauses first.
		list, err := d.List(ctx)
		if err != nil && ctx.Err() == nil {
			d.cfg.Logger.DebugContext(ctx, "could not read destination pauses or states", slog.String("error", err.Error()))
		}
		var held []dedupe.HeldDestination
		for _, st := range list {
			if st.State != "unknown" {
				d.cfg.Metrics.destinationState(st.Source, st.Destination, st.DestinationState)
			}
			if h, ok := st.hold(); ok {
				held = append(held, h)
			}
		}
		d.mu.Lock()
		d.held = held
		d.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// refresh reads the pauses from Postgres. A destination this process
// saw paused and now sees resumed gets its held calls woken: every
// process does it as it learns of the resume, so a call one process held
// while its view was stale is woken by that process's own next read.
func (d *Destinations) refresh(ctx context.Context) error {
	pauses, err := d.store.PausedDestinations(ctx)
	if err != nil {
		return err
	}
	m := make(map[destinationRef]dedupe.Pause, len(pauses))
	for _, p := range pauses {
		m[destinationRef{p.Source, p.Destination}] = p
	}
	d.mu.Lock()
	before := d.paused
	d.paused = m
	d.mu.Unlock()
	redisCtx, cancel := context.WithTimeout(ctx, StateReadTimeout)
	defer cancel()
	for ref := range before {
		if _, still := m[ref]; !still {
			woke, err := d.steering.enqueuer.Wake(redisCtx, ref.source, ref.destination)
			log := d.cfg.Logger.With(slog.String("source", ref.source), slog.String("destination", ref.destination))
			if err != nil {
				log.WarnContext(ctx, "destination resumed; its held calls go out as their holds end", slog.String("error", err.Error()))
				continue
			}
			log.InfoContext(ctx, "destination resumed; held calls go out now", slog.Int("woken", woke))
		}
	}
	return nil
}

// Held returns the destinations whose calls wait whatever a run says
// (paused, circuit open), as of the last read (every Interval): the
// event views show the runs they hold as held, with the reason.
func (d *Destinations) Held() []dedupe.HeldDestination {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.held
}

// hold says whether st holds its calls, and how.
func (st DestinationStatus) hold() (dedupe.HeldDestination, bool) {
	h := dedupe.HeldDestination{Source: st.Source, Destination: st.Destination}
	switch st.State {
	case "paused":
		h.Reason = "paused"
	case "open":
		h.Reason = "circuit open"
		if !st.LastFailure.IsZero() {
			h.Until = st.LastFailure.Add(st.Circuit.Cooldown)
		}
	default:
		return h, false
	}
	return h, true
}

// DestinationStatus is one destination as the operator sees it.
type DestinationStatus struct {
	Source, Destination string
	DestinationState
	// Pause is the pause's record while paused.
	Pause *dedupe.Pause
	// URL is where calls go, credentials redacted (user, password and
	// query values).
	URL string
	// Limits as configured.
	Concurrency int
	Rate        string
	Circuit     Circuit
	// FairBy is the fair_by field, or "".
	FairBy string
}

// StateReadTimeout bounds the Redis reads of one List, Pause or Resume
// together: a Redis that hangs leaves the steering states unknown after
// it, instead of holding the admin page for as long as Redis hangs.
const StateReadTimeout = 2 * time.Second

// ErrUnknownDestination is returned when a destination is not configured
// for its source.
var ErrUnknownDestination = errors.New("destination is not configured for the source")

// List reads the pauses again and returns every configured destination's
// status, by source and name. Redis failing to answer leaves the steering
// state unknown (the pause and the limits are still listed) and returns
// the error with the list.
func (d *Destinations) List(ctx context.Context) ([]DestinationStatus, error) {
	var out []DestinationStatus
	firstErr := d.refresh(ctx)
	redisCtx, cancel := context.WithTimeout(ctx, StateReadTimeout)
	defer cancel()
	for source, dests := range d.routes.Load() {
		for name := range dests {
			st, err := d.status(redisCtx, source, name)
			if err != nil && firstErr == nil {
				firstErr = err
			}
			out = append(out, st)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Source != out[j].Source {
			return out[i].Source < out[j].Source
		}
		return out[i].Destination < out[j].Destination
	})
	return out, firstErr
}

func (d *Destinations) status(ctx context.Context, source, name string) (DestinationStatus, error) {
	dest, ok := d.routes.Load()[source][name]
	if !ok {
		return DestinationStatus{}, fmt.Errorf("%w: %s/%s", ErrUnknownDestination, source, name)
	}
	out := DestinationStatus{Source: source, Destination: name, URL: redactURL(dest.URL), Concurrency: dest.Concurrency, Circuit: dest.Circuit}
	if dest.Rate != nil {
		out.Rate = dest.Rate.String()
	}
	if dest.FairBy != nil {
		out.FairBy = dest.FairBy.String()
	}
	d.mu.RLock()
	if p, ok := d.paused[destinationRef{source, name}]; ok {
		out.Pause = &p
	}
	d.mu.RUnlock()
	st, err := d.steering.State(ctx, source, dest)
	if err != nil {
		out.State = "unknown"
		if out.Pause != nil {
			out.State = "paused"
		}
		return out, err
	}
	out.DestinationState = st
	return out, nil
}

// Pause pauses destination of source: its calls wait (no attempt spent)
// until Resume; every process sees it within Interval. by and reason are
// recorded and logged.
func (d *Destinations) Pause(ctx context.Context, source, destination, by, reason string) (DestinationStatus, error) {
	return d.change(ctx, source, destination, func() (bool, error) {
		return d.store.PauseDestination(ctx, source, destination, by, reason)
	}, func(log *slog.Logger) {
		log.WarnContext(ctx, "destination paused: its calls wait until it is resumed", slog.String("by", by), slog.String("reason", reason))
	})
}

// Resume resumes destination of source; each process wakes the calls it
// held for it as it reads the resume (within Interval).
func (d *Destinations) Resume(ctx context.Context, source, destination, by string) (DestinationStatus, error) {
	return d.change(ctx, source, destination, func() (bool, error) {
		return d.store.ResumeDestination(ctx, source, destination)
	}, func(log *slog.Logger) {
		log.InfoContext(ctx, "destination resumed: every process wakes its held calls as it reads the resume", slog.String("by", by))
	})
}

// change is what Pause and Resume share: it checks that destination is
// configured for source, records the change in Postgres (store reports
// whether it changed anything), reads the pauses again, logs the change
// when there was one, and returns the destination's status.
func (d *Destinations) change(ctx context.Context, source, destination string, store func() (bool, error), logChange func(*slog.Logger)) (DestinationStatus, error) {
	if _, ok := d.routes.Load()[source][destination]; !ok {
		return DestinationStatus{}, fmt.Errorf("%w: %s/%s", ErrUnknownDestination, source, destination)
	}
	changed, err := store()
	if err != nil {
		return DestinationStatus{}, err
	}
	if err := d.refresh(ctx); err != nil {
		return DestinationStatus{}, err
	}
	if changed {
		logChange(d.cfg.Logger.With(slog.String("source", source), slog.String("destination", destination)))
	}
	redisCtx, cancel := context.WithTimeout(ctx, StateReadTimeout)
	defer cancel()
	st, err := d.status(redisCtx, source, destination)
	return st, ignoreRedis(err)
}

// ignoreRedis drops an error of reading the steering state: the pause
// itself is done.
func ignoreRedis(err error) error {
	if errors.Is(err, ErrUnknownDestination) {
		return err
	}
	return nil
}
