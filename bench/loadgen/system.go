package loadgen

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhookd/webhookd/internal/sink"
)

// system is the system under test started in this process: a fresh (or
// reused) database, a cleared queue, the sink as the one destination, and
// webhookd (or the naive ingest in front of webhookd's worker).
type system struct {
	// url is the base URL requests go to.
	url string
	// pool reads the database for the checks.
	pool *pgxpool.Pool
	// sink reads the destination; nil without a worker.
	sink sinkView
	// preload is the number of preloaded events (found in a reused
	// database, or inserted).
	preload int64

	cleanups []func()
}

// close stops what startSystem started, in reverse order.
func (s *system) close() {
	for _, f := range slices.Backward(s.cleanups) {
		f()
	}
	s.cleanups = nil
}

// startSystem prepares the environment cfg names and starts the system
// under test on cfg.Listen (a free loopback port when empty). The caller
// closes the returned system, also after an error.
func startSystem(ctx context.Context, cfg Config) (*system, error) {
	s := &system{preload: cfg.Preload}
	src := *cfg.Source
	dropDatabase, err := prepareDatabase(ctx, cfg)
	s.cleanups = append(s.cleanups, dropDatabase)
	if err != nil {
		return s, err
	}
	if s.pool, err = openPool(ctx, cfg.DatabaseURL); err != nil {
		return s, err
	}
	s.cleanups = append(s.cleanups, s.pool.Close)
	if cfg.ReuseDatabase {
		if err := resetForReuse(ctx, s.pool, src.Name); err != nil {
			return s, err
		}
	}
	if err := clearQueue(ctx, cfg.RedisURL, cfg.Queue); err != nil {
		return s, fmt.Errorf("error clearing queue %s: %w", cfg.Queue, err)
	}
	s.cleanups = append(s.cleanups, func() { _ = clearQueue(context.WithoutCancel(ctx), cfg.RedisURL, cfg.Queue) })

	snk := sink.New(nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return s, err
	}
	sinkSrv := &http.Server{Handler: snk, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = sinkSrv.Serve(l) }()
	s.cleanups = append(s.cleanups, func() { _ = sinkSrv.Close() })
	if !cfg.NoWorker {
		s.sink = localSink{snk}
	}
	sinkURL := "http://" + l.Addr().String() + "/hook"

	switch {
	case cfg.Preload > 0:
		if err := preload(ctx, s.pool, src, cfg.Preload, cfg.BodySize, cfg.Progress); err != nil {
			return s, err
		}
	case cfg.ReuseDatabase:
		// The kept preload counts as sent, so --duplicates repeats ids
		// spread over all of it.
		if s.preload, err = preloaded(ctx, s.pool, src.Name); err != nil {
			return s, err
		}
	}

	listen := cmp.Or(cfg.Listen, "127.0.0.1:0")
	env := Env{DatabaseURL: cfg.DatabaseURL, RedisURL: cfg.RedisURL, Queue: cfg.Queue, Source: src,
		SinkURL: sinkURL, Gateway: !cfg.Naive, Worker: !cfg.NoWorker, Rules: cfg.Rules, Log: cfg.Log}
	if !cfg.Naive {
		env.Listen = listen
	}
	base, stop, err := startWebhookd(ctx, env)
	if err != nil {
		return s, fmt.Errorf("error starting webhookd: %w", err)
	}
	s.cleanups = append(s.cleanups, func() {
		if err := stop(); err != nil {
			cfg.Log.Warn("webhookd stopped with an error", slog.String("error", err.Error()))
		}
	})
	s.url = base
	if cfg.Naive {
		ns, err := StartNaive(ctx, NaiveConfig{DatabaseURL: cfg.DatabaseURL, RedisURL: cfg.RedisURL, Queue: cfg.Queue,
			Source: src, SinkURL: sinkURL, PoolSize: cfg.NaivePool, Listen: listen})
		if err != nil {
			return s, err
		}
		s.cleanups = append(s.cleanups, func() { _ = ns.Close() })
		s.url = ns.URL
	}
	return s, nil
}
