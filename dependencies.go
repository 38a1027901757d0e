package webhookd

import (
	"context"
	"log/slog"
	"time"

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
