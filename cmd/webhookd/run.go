package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/webhookd/webhookd"
	"github.com/webhookd/webhookd/config"
	"github.com/webhookd/webhookd/internal/tracing"
)

// newLogger builds the JSON logger every process uses (level is
// validated by the config), and carries go-redis's lines into it.
func newLogger(level slog.Level) *slog.Logger {
	log := webhookd.NewLogger(os.Stdout, level)
	webhookd.RouteRedisLogs(log)
	webhookd.RouteTracingLogs(log)
	return log
}

// serve runs a webhookd process with the parts r names until ctx ends or
// its HTTP server fails, then stops it.
func serve(ctx context.Context, cfg *config.Config, r webhookd.Roles, log *slog.Logger) error {
	pcfg := cfg.Process
	pcfg.Roles = r
	for _, w := range cfg.Warnings {
		log.WarnContext(ctx, "unwise configuration", slog.String("where", w.Where), slog.String("key", w.Key), slog.String("problem", w.Msg))
	}
	tp, err := tracing.FromEnv(ctx)
	if err != nil {
		return &config.Error{Where: "$OTEL_* (environment)", Msg: err.Error()}
	}
	if tp != nil {
		pcfg.TracerProvider = tp
		defer func() {
			// Export the spans still buffered, within a bound: a collector
			// that went away must not hold the exit.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := tp.Shutdown(ctx); err != nil {
				log.Warn("could not export the last spans", slog.String("error", err.Error()))
			}
		}()
	}
	p, err := webhookd.Start(ctx, pcfg, log)
	if errors.Is(err, webhookd.ErrListen) {
		return cfg.LocateError("listen", err)
	}
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case err = <-p.Serving():
	}
	log.Info("webhookd shutting down")
	if e := p.Stop(context.Background()); err == nil {
		err = e
	}
	return err
}
