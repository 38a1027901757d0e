package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway"
	"github.com/webhookd/webhookd/jobs"
	"github.com/webhookd/webhookd/migrations"
)

// roles says which parts a process runs.
type roles struct {
	gateway bool
	worker  bool
}

// newLogger builds the JSON logger every process uses.
func newLogger(level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: l}))
}

// openPool migrates the database and opens a pool sized for the roles.
func openPool(ctx context.Context, cfg *config, log *slog.Logger, maxConns int32) (*pgxpool.Pool, error) {
	version, err := migrations.Up(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	log.InfoContext(ctx, "database schema is current", slog.Uint64("version", uint64(version)))
	pc, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("error parsing database_url: %w", err)
	}
	pc.MaxConns = maxConns
	pc.ConnConfig.ConnectTimeout = 3 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("error opening database pool: %w", err)
	}
	return pool, nil
}

// openRedis connects the go-redis client Asynq shares.
func openRedis(cfg *config) (*redis.Client, error) {
	opts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("error parsing redis_url: %w", err)
	}
	opts.PoolSize = 64
	return redis.NewClient(opts), nil
}

// app holds what a process has opened, for the pieces cmd wires on top
// (admin routes, scheduled maintenance).
type app struct {
	cfg      *config
	log      *slog.Logger
	pool     *pgxpool.Pool
	store    *dedupe.Store
	redis    *redis.Client
	enqueuer *jobs.Enqueuer
	registry *prometheus.Registry
	metrics  *jobs.Metrics
}

// run runs a webhookd process until ctx ends, then shuts down in reverse
// order of dependency.
func run(ctx context.Context, cfg *config, r roles, log *slog.Logger, ready func(addr net.Addr)) error {
	pool, err := openPool(ctx, cfg, log, 24)
	if err != nil {
		return err
	}
	defer pool.Close()
	store := dedupe.New(pool)

	rdb, err := openRedis(cfg)
	if err != nil {
		return err
	}
	defer rdb.Close()
	withRedisFaults(rdb, log)
	routes := cfg.routes()
	enqueuer := jobs.NewEnqueuer(rdb, cfg.Queue, routes)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	jobMetrics := jobs.NewMetrics(reg)

	bg, stopBackground := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBackground()
	var background sync.WaitGroup

	gwCfg := gateway.Config{
		MaxBodyBytes: cfg.MaxBodyBytes,
		Registry:     reg,
		Logger:       log,
		Readiness: []gateway.Check{
			{Name: "postgres", Func: store.Ping},
			{Name: "redis", Func: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }},
		},
	}
	var (
		batcher *dedupe.Batcher
		relay   *jobs.Relay
	)
	if r.gateway {
		sources, err := cfg.gatewaySources()
		if err != nil {
			return err
		}
		for name, s := range sources {
			if s.Scheme == "none" {
				log.WarnContext(ctx, "SOURCE ACCEPTS UNSIGNED WEBHOOKS: anyone who can reach it can inject events", slog.String("source", name))
			}
		}
		gwCfg.Sources = sources
		// Two statements in flight: batches grow large (fewer commits, less
		// Postgres CPU per event) and one slow statement does not stall
		// every request. At moderate rates a batch of fewer than 8 waits
		// up to 1 ms for company, so a statement's fixed cost is shared
		// instead of paid per event. See docs/performance.md.
		batcher = dedupe.NewBatcher(pool, dedupe.BatcherConfig{MaxInFlight: 2, Linger: time.Millisecond})
		relay = jobs.NewRelay(enqueuer, jobs.RelayConfig{Logger: log, Metrics: jobMetrics})
		background.Go(func() { relay.Run(bg) })
	}
	// Every process recovers lost work (one at a time), so any survivor
	// does it whichever processes die.
	reconciler := jobs.NewReconciler(store, enqueuer, jobs.ReconcilerConfig{
		Interval: cfg.Worker.RecoveryEvery.std(),
		Lease:    cfg.Lease.std(),
		MinAge:   cfg.Worker.RecoveryMinAge.std(),
		Logger:   log,
		Metrics:  jobMetrics,
	})
	background.Go(func() { reconciler.Run(bg) })

	var (
		worker *jobs.Server
		runs   *dedupe.RunBatcher
	)
	if r.worker {
		// One claim and one outcome statement in flight, each carrying
		// up to 128 runs: runs queue up behind the statement in flight and
		// go out together, and a second outcome statement in flight added
		// no throughput (docs/performance.md).
		runs = dedupe.NewRunBatcher(store, dedupe.BatcherConfig{MaxBatch: 128, MaxInFlight: 1})
		handler := jobs.NewHandler(withRunFaults(runs, log), jobs.HandlerConfig{
			Routes:      routes,
			Lease:       cfg.Lease.std(),
			Backoff:     jobs.Backoff{Base: cfg.Worker.RetryBase.std(), Max: cfg.Worker.RetryMax.std()},
			DefaultHold: cfg.Worker.DefaultHold.std(),
			Logger:      log,
			Metrics:     jobMetrics,
		})
		worker = jobs.NewServer(rdb, handler, jobs.ServerConfig{
			Queue:           cfg.Queue,
			Concurrency:     cfg.Worker.Concurrency,
			ShutdownTimeout: cfg.Worker.ShutdownWait.std(),
			Backoff:         jobs.Backoff{Base: cfg.Worker.RetryBase.std(), Max: cfg.Worker.RetryMax.std()},
			Logger:          log,
		})
		if err := worker.Start(); err != nil {
			return err
		}
	}

	var rec interface {
		Record(context.Context, dedupe.Event) (dedupe.Recorded, error)
	}
	if batcher != nil {
		rec = withFaults(batcher, log)
	}
	var handoff interface{ Notify(string, string) }
	if relay != nil {
		handoff = relay
	}
	srv := gateway.New(gwCfg, rec, handoff)
	a := &app{cfg: cfg, log: log, pool: pool, store: store, redis: rdb, enqueuer: enqueuer, registry: reg, metrics: jobMetrics}
	if err := mountAdmin(bg, a, srv); err != nil {
		return err
	}
	if r.worker {
		background.Add(1)
		go func() { defer background.Done(); runMaintenance(bg, a) }()
	}

	l, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("error listening on %s: %w", cfg.Listen, err)
	}
	log.InfoContext(ctx, "webhookd started", slog.String("listen", l.Addr().String()),
		slog.Bool("gateway", r.gateway), slog.Bool("worker", r.worker), slog.Int("sources", len(cfg.Sources)))
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(l) }()
	if ready != nil {
		ready(l.Addr())
	}

	select {
	case <-ctx.Done():
	case err = <-serveErr:
	}
	log.InfoContext(ctx, "webhookd shutting down")

	// Stop accepting HTTP and finish in-flight requests.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if e := srv.Shutdown(shutdownCtx); e != nil && !errors.Is(e, context.Canceled) {
		log.Warn("http shutdown", slog.String("error", e.Error()))
	}
	if batcher != nil {
		batcher.Close()
	}
	// Stop the relay (it hands off what it still holds) and the reconciler.
	stopBackground()
	background.Wait()
	// Let running tasks finish; unfinished ones go back to the queue.
	if worker != nil {
		worker.Shutdown()
		runs.Close()
	}
	log.Info("webhookd stopped")
	return err
}

// isUndefinedDatabase reports whether err says the database does not exist.
func isUndefinedDatabase(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "3D000"
}
