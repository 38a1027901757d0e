package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/hibiken/asynq"
)

type loggerKey struct{}

// payloadKey carries the task's decoded payload from the middleware to
// the handler, so it is decoded once.
type payloadKey struct{}

// loggerFrom returns the task's logger from ctx, or fallback.
func loggerFrom(ctx context.Context, fallback *slog.Logger) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok {
		return l
	}
	return fallback
}

// logMiddleware derives a logger carrying the task's source, event id,
// key and Asynq retry count, and puts it in ctx for the handler.
func logMiddleware(base *slog.Logger) asynq.MiddlewareFunc {
	return func(next asynq.Handler) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
			log := base
			if p, err := decodePayload(t.Payload()); err == nil {
				log = log.With(
					slog.String("source", p.Source),
					slog.String("event_id", p.EventID),
					slog.String("key", p.Key()),
					slog.String("destination", p.Destination),
				)
				ctx = context.WithValue(ctx, payloadKey{}, p)
			}
			if n, ok := asynq.GetRetryCount(ctx); ok {
				log = log.With(slog.Int("task_retry", n))
			}
			return next.ProcessTask(context.WithValue(ctx, loggerKey{}, log), t)
		})
	}
}

// asynqLogger adapts slog to asynq.Logger so the server's own lines are
// JSON too.
type asynqLogger struct{ l *slog.Logger }

func (a asynqLogger) Debug(args ...any) {
	a.l.Debug(fmt.Sprint(args...), slog.String("component", "asynq"))
}
func (a asynqLogger) Info(args ...any) {
	a.l.Info(fmt.Sprint(args...), slog.String("component", "asynq"))
}
func (a asynqLogger) Warn(args ...any) {
	a.l.Warn(fmt.Sprint(args...), slog.String("component", "asynq"))
}
func (a asynqLogger) Error(args ...any) {
	a.l.Error(fmt.Sprint(args...), slog.String("component", "asynq"))
}
func (a asynqLogger) Fatal(args ...any) {
	a.l.Error(fmt.Sprint(args...), slog.String("component", "asynq"))
	os.Exit(1)
}
