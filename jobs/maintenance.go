package jobs

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/webhookd/webhookd/dedupe"
)

// maintenanceStore is what scheduled maintenance needs from dedupe.Store.
type maintenanceStore interface {
	RunRetention(ctx context.Context, opts dedupe.RetentionOptions) (dedupe.RetentionResult, error)
	DuplicateKeys(ctx context.Context, window time.Duration) ([]dedupe.DuplicateKey, error)
	UnknownCalls(ctx context.Context, window time.Duration) (int, []dedupe.UnknownCall, error)
	RecordMaintenance(ctx context.Context, run dedupe.MaintenanceRun) error
	LastMaintenance(ctx context.Context, kind string) (dedupe.MaintenanceRun, error)
	AnalyzeGrownTables(ctx context.Context) ([]string, error)
}

// MaintenanceConfig configures scheduled maintenance.
type MaintenanceConfig struct {
	// Retention is the window of SPEC's `retention`: older events, runs and
	// logged calls are deleted. Defaults to dedupe.DefaultRetention.
	Retention time.Duration
	// RetentionInterval is the time between retention runs; the first runs
	// at start. Defaults to 1h.
	RetentionInterval time.Duration
	// RetentionBatch caps the rows one delete statement removes. Defaults
	// to dedupe.DefaultRetentionBatch.
	RetentionBatch int
	// DuplicateCheckInterval is the time between duplicate checks; the
	// first runs at start. Defaults to 10m.
	DuplicateCheckInterval time.Duration
	// DuplicateWindow is how far back the duplicate check looks. Defaults
	// to 7 days.
	DuplicateWindow time.Duration
	// StatisticsInterval is the time between checks that the delivery
	// path's tables have not outgrown their statistics
	// (dedupe.Store.AnalyzeGrownTables). Defaults to 2s: a plan made on an
	// empty table slows the delivery path more with every second the table
	// grows, and the check is one read of the statistics views.
	StatisticsInterval time.Duration
	// Timeout bounds one run of either job. Defaults to 10m.
	Timeout time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Metrics, when set, receives runs, rows deleted, last successes and
	// the duplicate count.
	Metrics *Metrics
}

// WithDefaults returns a copy of c with zero fields set to their defaults.
func (c MaintenanceConfig) WithDefaults() MaintenanceConfig {
	if c.Retention <= 0 {
		c.Retention = dedupe.DefaultRetention
	}
	if c.RetentionInterval <= 0 {
		c.RetentionInterval = time.Hour
	}
	if c.DuplicateCheckInterval <= 0 {
		c.DuplicateCheckInterval = 10 * time.Minute
	}
	if c.DuplicateWindow <= 0 {
		c.DuplicateWindow = dedupe.DefaultDuplicateWindow
	}
	if c.StatisticsInterval <= 0 {
		c.StatisticsInterval = 2 * time.Second
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Maintenance runs the scheduled jobs: retention (once across replicas,
// through an advisory lock in dedupe) and the duplicate check (harmless
// on every replica: it only reads).
type Maintenance struct {
	store maintenanceStore
	cfg   MaintenanceConfig
}

// NewMaintenance returns a Maintenance; call Run to start it.
func NewMaintenance(store maintenanceStore, cfg MaintenanceConfig) *Maintenance {
	return &Maintenance{store: store, cfg: cfg.WithDefaults()}
}

// Run runs the jobs at start and then on their intervals until ctx ends.
func (m *Maintenance) Run(ctx context.Context) {
	m.restoreLastSuccess(ctx)
	retention := time.NewTimer(0)
	defer retention.Stop()
	check := time.NewTimer(0)
	defer check.Stop()
	statistics := time.NewTicker(m.cfg.StatisticsInterval)
	defer statistics.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-retention.C:
			_, _ = m.RetentionOnce(ctx)
			retention.Reset(m.cfg.RetentionInterval)
		case <-check.C:
			_, _ = m.DuplicateCheckOnce(ctx)
			check.Reset(m.cfg.DuplicateCheckInterval)
		case <-statistics.C:
			m.statisticsOnce(ctx)
		}
	}
}

// statisticsOnce analyzes the delivery path's tables that outgrew their
// statistics, so the plans made on them while they were small are made
// again (dedupe.Store.AnalyzeGrownTables).
func (m *Maintenance) statisticsOnce(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	start := time.Now()
	tables, err := m.store.AnalyzeGrownTables(ctx)
	log := m.cfg.Logger.With(slog.String("job", "statistics"), slog.Duration("duration", time.Since(start)))
	switch {
	case err != nil && !errors.Is(err, context.Canceled):
		log.WarnContext(ctx, "could not refresh table statistics; autovacuum's analyze still will", slog.String("error", err.Error()))
	case len(tables) > 0:
		log.InfoContext(ctx, "tables outgrew their statistics; analyzed, so their statements are planned for their size",
			slog.String("tables", strings.Join(tables, " ")))
	}
}

// restoreLastSuccess sets the last-success gauges from the database, so a
// restarted process does not report retention as never run.
func (m *Maintenance) restoreLastSuccess(ctx context.Context) {
	for _, kind := range []string{dedupe.KindRetention, dedupe.KindDuplicateCheck} {
		run, err := m.store.LastMaintenance(ctx, kind)
		if err == nil {
			m.cfg.Metrics.lastSuccess(kind, run.FinishedAt)
		}
	}
}

// RetentionOnce runs retention once and returns what it deleted. A run
// skipped because another replica holds the lock returns Ran false.
func (m *Maintenance) RetentionOnce(ctx context.Context) (dedupe.RetentionResult, error) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	start := time.Now()
	res, err := m.store.RunRetention(ctx, dedupe.RetentionOptions{Retention: m.cfg.Retention, BatchSize: m.cfg.RetentionBatch})
	log := m.cfg.Logger.With(slog.String("job", dedupe.KindRetention), slog.Duration("duration", time.Since(start)))
	mm := m.cfg.Metrics
	mm.retentionDeleted(res)
	switch {
	case err != nil && errors.Is(err, context.Canceled):
		mm.maintenanceRun(dedupe.KindRetention, "canceled")
		return res, err
	case err != nil:
		mm.maintenanceRun(dedupe.KindRetention, "error")
		log.ErrorContext(ctx, "retention run failed", slog.String("error", err.Error()), slog.Int64("rows_deleted", res.Total()))
		return res, err
	case !res.Ran:
		mm.maintenanceRun(dedupe.KindRetention, "skipped")
		log.DebugContext(ctx, "retention runs on another replica")
		return res, nil
	}
	mm.maintenanceRun(dedupe.KindRetention, "success")
	mm.lastSuccess(dedupe.KindRetention, time.Now())
	log.InfoContext(ctx, "retention run finished",
		slog.Time("cutoff", res.Cutoff), slog.Int64("rows_deleted", res.Total()),
		slog.Int64("events", res.Events), slog.Int64("runs", res.Runs), slog.Int64("attempts", res.Attempts),
		slog.Int64("digests", res.Digests), slog.Int64("hand_offs", res.HandOffs), slog.Int64("issues", res.Issues), slog.Int("batches", res.Batches))
	return res, nil
}

// maxLoggedKeys caps the keys one duplicate-check log line lists.
const maxLoggedKeys = 50

// DuplicateCheckOnce counts keys with more than one successful
// destination call in DuplicateWindow and calls of unknown outcome
// (possible duplicates), exports both counts, records the run, and logs
// any such key. It returns the keys called successfully more than once.
func (m *Maintenance) DuplicateCheckOnce(ctx context.Context) ([]dedupe.DuplicateKey, error) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	start := time.Now()
	keys, err := m.store.DuplicateKeys(ctx, m.cfg.DuplicateWindow)
	var (
		unknown int
		calls   []dedupe.UnknownCall
	)
	if err == nil {
		unknown, calls, err = m.store.UnknownCalls(ctx, m.cfg.DuplicateWindow)
	}
	log := m.cfg.Logger.With(slog.String("job", dedupe.KindDuplicateCheck), slog.Duration("duration", time.Since(start)))
	mm := m.cfg.Metrics
	run := dedupe.MaintenanceRun{Kind: dedupe.KindDuplicateCheck, StartedAt: start, Found: int64(len(keys))}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return nil, err
		}
		mm.maintenanceRun(dedupe.KindDuplicateCheck, "error")
		log.ErrorContext(ctx, "duplicate check failed", slog.String("error", err.Error()))
		run.Error = err.Error()
		_ = m.store.RecordMaintenance(context.WithoutCancel(ctx), run)
		return nil, err
	}
	mm.duplicateKeys(len(keys))
	mm.unknownCalls(unknown)
	if unknown > 0 {
		names := make([]string, 0, min(len(calls), maxLoggedKeys))
		for _, c := range calls[:min(len(calls), maxLoggedKeys)] {
			names = append(names, c.Key)
		}
		log.WarnContext(ctx, "calls of unknown outcome: a worker stopped mid-call, so the destination may have seen these keys twice",
			slog.Int("unknown_calls", unknown), slog.String("keys", strings.Join(names, " ")),
			slog.Duration("window", m.cfg.DuplicateWindow))
	}
	mm.maintenanceRun(dedupe.KindDuplicateCheck, "success")
	mm.lastSuccess(dedupe.KindDuplicateCheck, time.Now())
	if err := m.store.RecordMaintenance(ctx, run); err != nil {
		log.WarnContext(ctx, "could not record the duplicate check", slog.String("error", err.Error()))
	}
	if len(keys) == 0 {
		log.InfoContext(ctx, "duplicate check found no key called successfully twice")
		return keys, nil
	}
	names := make([]string, 0, min(len(keys), maxLoggedKeys))
	for _, k := range keys[:min(len(keys), maxLoggedKeys)] {
		names = append(names, k.Key)
	}
	log.ErrorContext(ctx, "keys were delivered successfully more than once",
		slog.Int("duplicate_keys", len(keys)), slog.String("keys", strings.Join(names, " ")),
		slog.Duration("window", m.cfg.DuplicateWindow))
	return keys, nil
}
