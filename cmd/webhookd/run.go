package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/trace"

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

// reread loads the configuration file at path again for a reload, as
// serve started it: with roles r and tracing tp; its warnings are logged.
func reread(path string, r webhookd.Roles, tp trace.TracerProvider, log *slog.Logger) (webhookd.Config, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return webhookd.Config{}, err
	}
	logWarnings(context.Background(), cfg, log)
	pc := cfg.Process
	pc.Roles, pc.TracerProvider = r, tp
	return pc, nil
}

// logWarnings logs what in cfg works but is unwise.
func logWarnings(ctx context.Context, cfg *config.Config, log *slog.Logger) {
	for _, w := range cfg.Warnings {
		log.WarnContext(ctx, "unwise configuration", slog.String("where", w.Where), slog.String("key", w.Key), slog.String("problem", w.Msg))
	}
}

// serve runs a webhookd process with the parts r names until ctx ends or
// its HTTP server fails, then stops it.
func serve(ctx context.Context, cfg *config.Config, r webhookd.Roles, log *slog.Logger) error {
	pcfg := cfg.Process
	pcfg.Roles = r
	logWarnings(ctx, cfg, log)
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
	if cfg.Path != "" {
		pcfg.Load = func(context.Context) (webhookd.Config, error) { return reread(cfg.Path, r, pcfg.TracerProvider, log) }
	}
	// SIGHUP reloads, as POST /admin/reload does (SPEC); asked for
	// before Start so no signal in between ends the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	p, err := webhookd.Start(ctx, pcfg, log)
	if errors.Is(err, webhookd.ErrListen) {
		return cfg.LocateError("listen", err)
	}
	if err != nil {
		return err
	}
wait:
	for {
		select {
		case <-ctx.Done():
			break wait
		case err = <-p.Serving():
			break wait
		case <-hup:
			// Reload logs what it changed or every problem of the file.
			_, _ = p.Reload(ctx)
		}
	}
	log.Info("webhookd shutting down")
	if e := p.Stop(context.Background()); err == nil {
		err = e
	}
	return err
}
