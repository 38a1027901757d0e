package jobs

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/webhookd/webhookd/dedupe"
)

// sweepStore is what the sweeper needs from dedupe.Store.
type sweepStore interface {
	SweepExpired(ctx context.Context, limit int) ([]dedupe.SweptRun, error)
	OverdueRetries(ctx context.Context, idle time.Duration, limit int) ([]dedupe.SweptRun, error)
}

// SweeperConfig configures the Sweeper.
type SweeperConfig struct {
	// Interval between sweeps. Defaults to 30s; set it to at most lease/2.
	Interval time.Duration
	// BatchSize caps the runs reset per statement. Defaults to 100.
	BatchSize int
	// Timeout bounds one batch. Defaults to 30s.
	Timeout time.Duration
	// RetryIdle is how long a retryable failed run may go unclaimed before
	// its task counts as lost and is enqueued again; keep it above the
	// longest backoff plus the lease. Defaults to 1h5m.
	RetryIdle time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Metrics, when set, counts resets.
	Metrics *Metrics
}

// WithDefaults returns a copy of c with zero fields set to their defaults.
func (c SweeperConfig) WithDefaults() SweeperConfig {
	if c.Interval <= 0 {
		c.Interval = 30 * time.Second
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 100
	}
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	if c.RetryIdle <= 0 {
		c.RetryIdle = time.Hour + 5*time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Sweeper recovers runs whose worker died: a running run whose lease has
// passed becomes a retry with attempts + 1 (dead at max_attempts) and is
// re-enqueued with the same key.
type Sweeper struct {
	store    sweepStore
	enqueuer *Enqueuer
	cfg      SweeperConfig
}

// NewSweeper returns a Sweeper; call Run to start it.
func NewSweeper(store sweepStore, enqueuer *Enqueuer, cfg SweeperConfig) *Sweeper {
	return &Sweeper{store: store, enqueuer: enqueuer, cfg: cfg.WithDefaults()}
}

// Run sweeps every Interval until ctx ends.
func (s *Sweeper) Run(ctx context.Context) {
	ticker := time.NewTicker(s.cfg.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		if err := untilShort(ctx, s.cfg.BatchSize, s.SweepOnce); err != nil && !errors.Is(err, context.Canceled) {
			s.cfg.Logger.WarnContext(ctx, "sweep failed", slog.String("error", err.Error()))
		}
		if _, err := s.RequeueOverdue(ctx); err != nil && !errors.Is(err, context.Canceled) {
			s.cfg.Logger.WarnContext(ctx, "overdue retry check failed", slog.String("error", err.Error()))
		}
	}
}

// RequeueOverdue enqueues again one batch of retryable runs whose retry is
// overdue, with the same key, and returns how many it found.
func (s *Sweeper) RequeueOverdue(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	runs, err := s.store.OverdueRetries(ctx, s.cfg.RetryIdle, s.cfg.BatchSize)
	if err != nil {
		return 0, err
	}
	for _, run := range runs {
		s.requeue(ctx, run, "retry is overdue")
	}
	return len(runs), nil
}

// SweepOnce resets one batch of expired runs, re-enqueues those to retry,
// and returns how many it reset.
func (s *Sweeper) SweepOnce(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	swept, err := s.store.SweepExpired(ctx, s.cfg.BatchSize)
	if err != nil {
		return 0, err
	}
	for _, run := range swept {
		s.cfg.Metrics.swept(run.Status)
		if run.Status == dedupe.StatusDead {
			runLogger(s.cfg.Logger, run).ErrorContext(ctx, "run's lease passed and attempts are exhausted; run is dead")
			continue
		}
		s.requeue(ctx, run, "run's lease passed")
	}
	return len(swept), nil
}

// requeue enqueues run again with its key; a failure is left to the next
// overdue-retry check.
func (s *Sweeper) requeue(ctx context.Context, run dedupe.SweptRun, why string) {
	log := runLogger(s.cfg.Logger, run)
	err := s.enqueuer.Enqueue(ctx, DeliverPayload{
		Source: run.Source, EventID: run.ExternalID, Destination: run.Destination, Generation: run.Generation,
	})
	if err != nil {
		log.WarnContext(ctx, why+"; enqueue failed, the overdue-retry check tries again", slog.String("error", err.Error()))
		return
	}
	log.WarnContext(ctx, why+"; enqueued again with the same key")
}

func runLogger(log *slog.Logger, run dedupe.SweptRun) *slog.Logger {
	return log.With(slog.String("source", run.Source), slog.String("event_id", run.ExternalID),
		slog.String("key", run.Key), slog.Int("attempts", run.Attempts))
}
