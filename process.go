// Package webhookd assembles a webhookd process: the one place where the
// gateway, the hand-off, the reconciler, the worker, the admin surface and
// scheduled maintenance are put together on a Postgres pool and a Redis
// client. cmd/webhookd builds a Config from its YAML file; tests and the
// load generator build theirs with overrides, so they run what is
// deployed.
package webhookd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/webhookd/webhookd/alerts"
	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway"
	"github.com/webhookd/webhookd/gateway/admin"
	"github.com/webhookd/webhookd/jobs"
	"github.com/webhookd/webhookd/migrations"
)

// Roles says which parts a process runs. The reconciler runs in every
// process, so whichever processes die, a survivor recovers their work.
type Roles struct {
	// Gateway receives, verifies and records webhooks and hands them off.
	Gateway bool
	// Worker claims keys, calls destinations, and runs retention and the
	// duplicate check.
	Worker bool
}

// AdminConfig configures the admin surface under /admin. With no token
// and UnsafeTokenlessLoopback unset, admin is off (every route 403).
type AdminConfig struct {
	// Tokens are the full-access admin tokens (admin.Config.Tokens).
	Tokens []string
	// ReadOnlyTokens may read but not replay, pause or resume
	// (admin.Config.ReadOnlyTokens).
	ReadOnlyTokens []string
	// UnsafeTokenlessLoopback lets admin answer without a token to
	// loopback peers addressing localhost (admin.Config).
	UnsafeTokenlessLoopback bool
	// Hosts are more host names a tokenless admin answers to.
	Hosts []string
	// AllowQueueActions lets the Asynq dashboard change queues and tasks;
	// it is read-only otherwise.
	AllowQueueActions bool
	// SecureCookie marks the session cookie Secure over plain HTTP too
	// (admin.Config.SecureCookie).
	SecureCookie bool
}

// RejectedConfig bounds the rejected requests kept (gateway.RejectedConfig).
type RejectedConfig struct {
	// PerSourcePerMinute defaults to gateway.DefaultRejectedPerSourcePerMinute.
	PerSourcePerMinute int
	// Retention defaults to gateway.DefaultRejectedRetention.
	Retention time.Duration
}

// WorkerConfig tunes the worker.
type WorkerConfig struct {
	// Concurrency is the number of tasks run at once. Defaults to 256.
	Concurrency int
	// Backoff spaces retries of failed attempts.
	Backoff jobs.Backoff
	// DefaultHold is the wait after a 429 without Retry-After. Defaults
	// to 5s.
	DefaultHold time.Duration
	// ShutdownTimeout bounds the wait for running tasks at shutdown.
	// Defaults to 20s.
	ShutdownTimeout time.Duration
}

// Config is everything a webhookd process needs.
type Config struct {
	// Listen is the HTTP address, host:port; port 0 picks a free one.
	// Defaults to ":8080".
	Listen string
	// DatabaseURL is the Postgres connection string. Required.
	DatabaseURL string
	// Redis says where Redis is (one server, Sentinel or Cluster).
	// Required.
	Redis RedisConfig
	// Queue is the Asynq queue. Defaults to jobs.DefaultQueue.
	Queue string
	// QueueShards spreads tasks over this many Asynq queues by key
	// (jobs.Shards), so a Redis Cluster spreads them over its nodes.
	// Defaults to 1: the one queue named Queue.
	QueueShards int
	// Roles says what the process runs; at least one is required.
	Roles Roles
	// Lease is how long a claimed run may stay running before recovery
	// presumes its worker dead. Defaults to dedupe.DefaultLease.
	Lease time.Duration
	// Retention is how long events, runs and calls are kept. Defaults to
	// 720h.
	Retention time.Duration
	// AllowLinkLocalDestinations lets destinations call link-local and
	// cloud metadata addresses (169.254.169.254), refused by default.
	AllowLinkLocalDestinations bool
	// MaxBodyBytes caps a webhook's body. Defaults to
	// gateway.DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Sources are the configured senders and where their events go,
	// built by NewSources. Nil means none.
	Sources *Sources
	// Admin configures /admin.
	Admin AdminConfig
	// Rejected bounds the rejected requests a gateway keeps (rejected:);
	// zero fields take gateway's defaults.
	Rejected RejectedConfig
	// Worker tunes the worker.
	Worker WorkerConfig
	// Recovery tunes the reconciler; Lease, Logger, Metrics and
	// TracerProvider are set from the process.
	Recovery jobs.ReconcilerConfig
	// Maintenance tunes retention and the duplicate check; Retention,
	// Logger and Metrics are set from the process.
	Maintenance jobs.MaintenanceConfig
	// Issues tunes the issues a worker opens and closes from delivery
	// outcomes (issues:); Logger and Changed are set from the process.
	Issues jobs.IssuesConfig
	// Alerts sends messages about issues (alerts:) when it has channels;
	// Registerer and Logger are set from the process.
	Alerts alerts.NotifierConfig
	// Load reads the configuration again for a reload (SIGHUP, POST
	// /admin/reload); nil means the process cannot reload.
	Load func(ctx context.Context) (Config, error)
	// TracerProvider, when set, traces each event from its request to its
	// destination calls (SPEC; internal/tracing.FromEnv builds it from
	// OTEL_* variables). Nil turns tracing off. Shutting it down is the
	// caller's, after Stop.
	TracerProvider trace.TracerProvider
}

// WithDefaults returns a copy of c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Listen == "" {
		c.Listen = ":8080"
	}
	if c.Queue == "" {
		c.Queue = jobs.DefaultQueue
	}
	if c.QueueShards <= 0 {
		c.QueueShards = 1
	}
	if c.Lease <= 0 {
		c.Lease = dedupe.DefaultLease
	}
	if c.Retention <= 0 {
		c.Retention = dedupe.DefaultRetention
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = gateway.DefaultMaxBodyBytes
	}
	if c.Sources == nil {
		c.Sources = &Sources{}
	}
	if c.Recovery.Interval <= 0 {
		c.Recovery.Interval = min(c.Lease/2, 2*time.Second)
	}
	return c
}

// Validate returns an error naming the first field that cannot work.
func (c Config) Validate() error {
	if err := c.Redis.Validate(); err != nil {
		return err
	}
	switch {
	case c.DatabaseURL == "":
		return errors.New("webhookd: DatabaseURL is required")
	case !c.Roles.Gateway && !c.Roles.Worker:
		return errors.New("webhookd: Roles names neither gateway nor worker")
	case c.Recovery.Interval > c.Lease/2:
		return errors.New("webhookd: Recovery.Interval must be at most Lease/2, so an expired lease is found promptly")
	}
	return nil
}

// Process is a running webhookd process.
type Process struct {
	cfg      Config
	log      *slog.Logger
	listener net.Listener // bound first; served once everything has started
	serving  bool

	pool *pgxpool.Pool
	// postgres checks Postgres for readiness and the dependency watch
	// on a connection outside pool.
	postgres *postgresProbe
	redis    redis.UniversalClient
	srv      *gateway.Server

	routes  *jobs.RouteTable
	metrics *jobs.Metrics
	reloads *prometheus.CounterVec
	// reloading makes reloads one at a time (SIGHUP and the API).
	reloading sync.Mutex

	batcher *dedupe.Batcher
	runs    *dedupe.RunBatcher
	worker  *jobs.Server
	// issues holds the failures a worker gathered for its issues.
	issues *jobs.Issues

	stopBackground context.CancelFunc
	background     sync.WaitGroup
	serveErr       chan error
	stopOnce       sync.Once
	stopErr        error
}

// Start binds cfg.Listen, applies pending migrations, opens Postgres and
// Redis, starts the parts cfg.Roles names and the reconciler, and serves
// HTTP on the bound address (webhooks, admin, /healthz, /readyz,
// /metrics). It returns once the process is serving; Stop ends it. The
// address is bound before anything else starts, so a port already taken
// is one error (ErrListen) with nothing to undo.
func Start(ctx context.Context, cfg Config, log *slog.Logger) (_ *Process, err error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	p := &Process{cfg: cfg, log: log, serveErr: make(chan error, 1)}
	if p.listener, err = net.Listen("tcp", cfg.Listen); err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrListen, cfg.Listen, err)
	}
	// On a failed start, close what was opened.
	defer func() {
		if err != nil {
			_ = p.Stop(context.WithoutCancel(ctx))
		}
	}()
	version, err := migrations.Up(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	log.InfoContext(ctx, "database schema is current", slog.Uint64("version", uint64(version)))
	if p.pool, err = OpenPool(ctx, cfg.DatabaseURL, 24); err != nil {
		return nil, err
	}
	store := dedupe.New(p.pool)
	if p.redis, err = OpenRedis(cfg.Redis); err != nil {
		return nil, err
	}
	withRedisFaults(p.redis, log)
	shards := jobs.Shards{Queue: cfg.Queue, N: cfg.QueueShards}
	// Every part reads the routes through one table, which a reload swaps.
	p.routes = jobs.NewRouteTable(cfg.Sources.Routes)
	enqueuer := jobs.NewShardedEnqueuer(p.redis, shards, p.routes)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registerBuildInfo(reg, ReadBuildInfo())
	metrics := jobs.NewMetrics(reg)
	p.metrics, p.reloads = metrics, newReloadMetrics(reg)
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	p.stopBackground = stop

	pingRedis := func(ctx context.Context) error { return PingRedis(ctx, p.redis) }
	p.postgres = newPostgresProbe(p.pool)
	watch := newDependencyWatch(dependencies(cfg.Roles, p.postgres.Check, pingRedis), time.Second, log, reg)
	p.background.Go(func() { watch.Run(bg) })
	gwCfg := gateway.Config{
		MaxBodyBytes:   cfg.MaxBodyBytes,
		Registry:       reg,
		Logger:         log,
		TracerProvider: cfg.TracerProvider,
		// Asana's handshake secret, learned once, verifies on every replica.
		HandshakeSecrets: store,
		// Readiness by role (SPEC): a gateway (and serve) is ready while
		// Postgres takes writes, Redis down only degrading it; a worker
		// needs both.
		Readiness: []gateway.Check{
			{Name: "postgres", Func: p.postgres.Check},
			{Name: "redis", Func: pingRedis, Degrades: cfg.Roles.Gateway},
		},
	}
	var (
		rec     recorder
		handoff interface {
			Notify(ctx context.Context, ref dedupe.EventRef)
		}
	)
	if cfg.Roles.Gateway {
		for name, s := range cfg.Sources.Gateway {
			if s.Scheme == "none" {
				log.WarnContext(ctx, "SOURCE ACCEPTS UNSIGNED WEBHOOKS: anyone who can reach it can inject events", slog.String("source", name))
			}
		}
		gwCfg.Sources = cfg.Sources.Gateway
		gwCfg.Rejected = gateway.NewRejectedRecorder(store, gateway.RejectedConfig{
			PerSourcePerMinute: cfg.Rejected.PerSourcePerMinute, Retention: cfg.Rejected.Retention, Logger: log, Registry: reg,
		})
		p.background.Go(func() { gwCfg.Rejected.Run(bg) })
		// One record statement at a time while they are quick, so the
		// next batch grows meanwhile (fewer, larger statements); a second
		// beside one that has run 10 ms, so a slow statement (a lock
		// wait, a slow disk) does not stall every request. A second
		// sooner (2 ms) gave the acks a little more and the deliveries
		// beside them less. A batch of fewer than 8 waits up to 1 ms for
		// company, so moderate rates do not pay a statement per event
		// (docs/performance.md).
		p.batcher = dedupe.NewBatcher(p.pool, dedupe.BatcherConfig{MaxInFlight: 2, OverlapAfter: 10 * time.Millisecond, Linger: time.Millisecond})
		rec = withFaults(p.batcher, log)
		relay := jobs.NewRelay(enqueuer, store, jobs.RelayConfig{Logger: log, Metrics: metrics, TracerProvider: cfg.TracerProvider})
		handoff = relay
		p.background.Go(func() { relay.Run(bg) })
	}

	// Every process with channels claims and sends messages about
	// issues; Postgres gives each message to one of them.
	notify := func() {}
	if len(cfg.Alerts.Channels) > 0 {
		alertsCfg := cfg.Alerts
		alertsCfg.Registerer, alertsCfg.Logger = reg, log
		notifier := alerts.NewNotifier(store, alertsCfg)
		p.background.Go(func() { notifier.Run(bg) })
		notify = notifier.Wake
	}

	metrics.RegisterDestinations(cfg.Sources.Routes)
	destinations := jobs.NewDestinations(store, enqueuer, p.routes, jobs.DestinationsConfig{Logger: log, Metrics: metrics,
		RateWaiters: max(cfg.Worker.Concurrency/2, 1)})
	p.background.Go(func() { destinations.Run(bg) })

	recovery := cfg.Recovery
	recovery.Lease, recovery.Logger, recovery.Metrics, recovery.TracerProvider = cfg.Lease, log, metrics, cfg.TracerProvider
	reconciler := jobs.NewReconciler(store, enqueuer, recovery)
	p.background.Go(func() { reconciler.Run(bg) })

	if cfg.Roles.Worker {
		// One claim and one outcome statement in flight, each carrying up
		// to 128 runs (docs/performance.md).
		p.runs = dedupe.NewRunBatcher(store, dedupe.BatcherConfig{MaxBatch: 128, MaxInFlight: 1})
		issuesCfg := cfg.Issues
		issuesCfg.Logger, issuesCfg.Changed = log, notify
		issues := jobs.NewIssues(store, issuesCfg)
		p.issues = issues
		p.background.Go(func() { issues.Run(bg) })
		handler := jobs.NewHandler(withRunFaults(p.runs, log), jobs.HandlerConfig{
			HTTPClient:     &http.Client{Transport: jobs.NewTransport(cfg.AllowLinkLocalDestinations)},
			Routes:         p.routes,
			Lease:          cfg.Lease,
			Backoff:        cfg.Worker.Backoff,
			DefaultHold:    cfg.Worker.DefaultHold,
			Logger:         log,
			Metrics:        metrics,
			Steering:       destinations.Steering(),
			TracerProvider: cfg.TracerProvider,
			Issues:         issues,
		})
		queues, err := shards.ServedQueues(p.redis)
		if err != nil {
			log.WarnContext(ctx, "could not list the queues of an earlier queue_shards; serving the current shards, and recovery writes what waits elsewhere into them",
				slog.String("error", err.Error()))
		}
		if len(queues) > shards.N {
			log.InfoContext(ctx, "also serving the queues of an earlier queue_shards, so tasks written there still run", slog.Any("queues", queues[shards.N:]))
		}
		p.worker = jobs.NewServer(p.redis, handler, jobs.ServerConfig{
			Queues:          queues,
			Concurrency:     cfg.Worker.Concurrency,
			ShutdownTimeout: cfg.Worker.ShutdownTimeout,
			Backoff:         cfg.Worker.Backoff,
			Logger:          log,
		})
		if err := p.worker.Start(); err != nil {
			p.worker = nil
			return nil, err
		}
		maintenance := cfg.Maintenance
		maintenance.Retention, maintenance.Logger, maintenance.Metrics = cfg.Retention, log, metrics
		m := jobs.NewMaintenance(store, maintenance)
		p.background.Go(func() { m.Run(bg) })
	}

	p.srv = gateway.New(gwCfg, rec, handoff)
	admCfg := admin.Config{
		Tokens:                  cfg.Admin.Tokens,
		ReadOnlyTokens:          cfg.Admin.ReadOnlyTokens,
		UnsafeTokenlessLoopback: cfg.Admin.UnsafeTokenlessLoopback,
		Hosts:                   cfg.Admin.Hosts,
		SecureCookie:            cfg.Admin.SecureCookie,
		Routes:                  p.routes,
		Sources:                 p.srv.Sources(),
		Reload:                  p.Reload,
		Dashboard:               admin.NewDashboard(p.redis, !cfg.Admin.AllowQueueActions),
		Destinations:            destinations,
		TestEvents:              jobs.NewTestSender(p.routes, &http.Client{Transport: jobs.NewTransport(cfg.AllowLinkLocalDestinations)}, log),
		Issues:                  store,
		Logger:                  log,
	}
	if cfg.Admin.AllowQueueActions && len(cfg.Admin.ReadOnlyTokens) > 0 {
		admCfg.ReadOnlyDashboard = admin.NewDashboard(p.redis, true)
	}
	adm := admin.New(store, jobs.NewReplayer(store, enqueuer, p.routes, jobs.ReplayerConfig{Logger: log}), admCfg)
	adm.Mount(p.srv.Echo())
	adm.LogAccess(ctx)
	metrics.RegisterQueues(shards)
	p.background.Go(func() { metrics.WatchQueueSizes(bg, p.redis, shards, 0, log) })

	p.serving = true
	go func() { p.serveErr <- p.srv.Serve(p.listener) }()
	build := ReadBuildInfo()
	log.InfoContext(ctx, "webhookd started", slog.String("listen", p.Addr().String()),
		slog.String("version", build.Version), slog.String("revision", build.Revision),
		slog.Bool("gateway", cfg.Roles.Gateway), slog.Bool("worker", cfg.Roles.Worker), slog.Int("sources", len(cfg.Sources.Specs)),
		slog.Bool("tracing", cfg.TracerProvider != nil))
	return p, nil
}

// ErrListen is returned by Start when its listen address cannot be bound
// (a port taken, an address not of this host).
var ErrListen = errors.New("cannot listen on")

// Addr returns the address the process serves HTTP on.
func (p *Process) Addr() net.Addr { return p.listener.Addr() }

// Handler returns the process's HTTP handler, to serve a request without
// the network (one net/http's parser would refuse, in a test).
func (p *Process) Handler() http.Handler { return p.srv }

// Serving returns a channel that receives the error that stopped the HTTP
// server (nil after Stop).
func (p *Process) Serving() <-chan error { return p.serveErr }

// Stop shuts the process down in reverse order of dependency: it stops
// accepting HTTP and lets in-flight requests finish (until ctx ends, at
// most 15s), stops the relay (which hands off what it still holds), the
// reconciler and maintenance, lets running tasks finish (up to
// Worker.ShutdownTimeout; the rest go back to the queue), then closes
// the destinations' broker connections, Redis and the pool. It returns
// the HTTP server's shutdown error, if any; calling it again returns the
// same.
func (p *Process) Stop(ctx context.Context) error {
	p.stopOnce.Do(func() {
		if !p.serving && p.listener != nil {
			_ = p.listener.Close()
		}
		if p.srv != nil {
			ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			if err := p.srv.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
				p.stopErr = fmt.Errorf("error stopping http: %w", err)
			}
		}
		if p.batcher != nil {
			p.batcher.Close()
		}
		if p.stopBackground != nil {
			p.stopBackground()
		}
		p.background.Wait()
		if p.worker != nil {
			p.worker.Shutdown()
		}
		if p.issues != nil {
			// The failures of the last deliveries.
			p.issues.Flush(context.WithoutCancel(ctx))
		}
		if p.routes != nil {
			p.routes.Load().Close() // broker connections
		}
		if p.runs != nil {
			p.runs.Close()
		}
		if p.redis != nil {
			_ = p.redis.Close()
		}
		if p.postgres != nil {
			p.postgres.Close(ctx)
		}
		if p.pool != nil {
			p.pool.Close()
		}
		p.log.Info("webhookd stopped")
	})
	return p.stopErr
}

// recorder records a delivery; withFaults may wrap it.
type recorder interface {
	Record(ctx context.Context, ev dedupe.Event) (dedupe.Recorded, error)
}

// OpenPool opens a Postgres pool on databaseURL with at most maxConns
// connections, through pgx's own parser. It does not migrate.
func OpenPool(ctx context.Context, databaseURL string, maxConns int32) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(databaseURL)
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
