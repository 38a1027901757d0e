package webhookd

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// dependency is a service a process needs, watched so that its loss and
// its return are each one log line.
type dependency struct {
	name  string
	check func(context.Context) error
	// lost says what the loss means for this process's work.
	lost string
}

// dependencies returns what a process with roles r needs, each with what
// its loss means for those roles.
func dependencies(r Roles, postgres, redis func(context.Context) error) []dependency {
	pg := dependency{name: "postgres", check: postgres}
	rd := dependency{name: "redis", check: redis}
	switch {
	case r.Gateway && r.Worker:
		pg.lost = "webhooks are answered 503 (senders retry them) and no destination is called until it is back"
		rd.lost = "webhooks are still recorded and acknowledged; they wait in the Postgres outbox, and deliveries wait, until it is back"
	case r.Gateway:
		pg.lost = "webhooks are answered 503 (senders retry them) until it is back"
		rd.lost = "webhooks are still recorded and acknowledged; they wait in the Postgres outbox until it is back"
	default:
		pg.lost = "no destination is called until it is back"
		rd.lost = "deliveries wait until it is back"
	}
	return []dependency{pg, rd}
}

// dependencyWatch checks each dependency every interval and logs one
// line when it becomes unreachable (what that means for this process)
// and one when it is reachable again (how long it was down), instead of
// one line per failed call. webhookd_dependency_up{dependency} follows
// it, for alerts.
type dependencyWatch struct {
	deps     []dependency
	interval time.Duration
	log      *slog.Logger
	up       *prometheus.GaugeVec
}

func newDependencyWatch(deps []dependency, interval time.Duration, log *slog.Logger, reg prometheus.Registerer) *dependencyWatch {
	up := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "webhookd_dependency_up",
		Help: "1 when the dependency (postgres, redis) answered this process's last check, 0 when it did not.",
	}, []string{"dependency"})
	reg.MustRegister(up)
	for _, d := range deps {
		up.WithLabelValues(d.name).Set(1)
	}
	return &dependencyWatch{deps: deps, interval: interval, log: log, up: up}
}

// Run checks until ctx ends.
func (w *dependencyWatch) Run(ctx context.Context) {
	downSince := make([]time.Time, len(w.deps))
	ticker := time.NewTicker(w.interval)
	defer ticker.Stop()
	for {
		for i, d := range w.deps {
			checkCtx, cancel := context.WithTimeout(ctx, w.interval)
			err := d.check(checkCtx)
			cancel()
			if ctx.Err() != nil {
				return
			}
			switch {
			case err != nil && downSince[i].IsZero():
				downSince[i] = time.Now()
				w.up.WithLabelValues(d.name).Set(0)
				w.log.ErrorContext(ctx, d.name+" unreachable: "+d.lost,
					slog.String("dependency", d.name), slog.String("error", err.Error()))
			case err == nil && !downSince[i].IsZero():
				w.up.WithLabelValues(d.name).Set(1)
				w.log.InfoContext(ctx, d.name+" reachable again",
					slog.String("dependency", d.name), slog.Duration("down_for", time.Since(downSince[i]).Round(time.Millisecond)))
				downSince[i] = time.Time{}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// postgresProbe checks that Postgres answers on a connection of its own,
// for the dependency watch and readiness. A pool whose connections are
// all busy with work is not Postgres down, but a check that waits behind
// that work for a connection says it is: under load, "postgres
// unreachable" lines, webhookd_dependency_up at 0 and a failing /readyz
// that takes a busy gateway out of its load balancer.
type postgresProbe struct {
	config *pgx.ConnConfig
	// turn holds the connection: one check at a time uses it, and a
	// check gives up waiting for its turn when its context ends.
	turn chan *pgx.Conn
}

// newPostgresProbe returns a probe connecting as pool does (its URL,
// target_session_attrs and timeouts included).
func newPostgresProbe(pool *pgxpool.Pool) *postgresProbe {
	p := &postgresProbe{config: pool.Config().ConnConfig.Copy(), turn: make(chan *pgx.Conn, 1)}
	p.turn <- nil
	return p
}

// Check pings Postgres on the probe's connection, or connects when it has
// none or the ping failed on it: a new session is the answer then.
func (p *postgresProbe) Check(ctx context.Context) error {
	var conn *pgx.Conn
	select {
	case conn = <-p.turn:
	case <-ctx.Done():
		return fmt.Errorf("error pinging postgres: waiting for the previous check: %w", ctx.Err())
	}
	defer func() { p.turn <- conn }()
	if conn != nil && !conn.IsClosed() {
		err := conn.Ping(ctx)
		if err == nil {
			return nil
		}
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_ = conn.Close(closeCtx)
		cancel()
		conn = nil
		if ctx.Err() != nil {
			return fmt.Errorf("error pinging postgres: %w", err)
		}
		// The server or a proxy may have closed the connection (an idle
		// timeout, a failover): that alone is not Postgres down, so a
		// new connection decides.
	}
	c, err := pgx.ConnectConfig(ctx, p.config)
	if err != nil {
		return fmt.Errorf("error connecting to postgres: %w", err)
	}
	conn = c
	return nil
}

// Close closes the probe's connection; a Check after it connects again.
func (p *postgresProbe) Close(ctx context.Context) {
	if conn := <-p.turn; conn != nil {
		_ = conn.Close(ctx)
	}
	p.turn <- nil
}
