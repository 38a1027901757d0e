package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/webhookd/webhookd/internal/quietlog"
)

type loggerKey struct{}

// payloadKey carries the task's decoded payload from the middleware to
// the handler, so it is decoded once.
type payloadKey struct{}

// loggerFrom returns the logger ctx carries (the task's, or one WithLogger
// put there), or fallback.
func loggerFrom(ctx context.Context, fallback *slog.Logger) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok {
		return l
	}
	return fallback
}

// WithLogger returns ctx carrying log: what jobs does with ctx (a
// Replayer's replays) logs there, so an admin request's lines carry its
// request id.
func WithLogger(ctx context.Context, log *slog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey{}, log)
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
			return next.ProcessTask(WithLogger(ctx, log), t)
		})
	}
}

// asynqLogger carries Asynq's own lines into slog, tagged component
// asynq, at most one line of a kind every 10s: while Redis is down its
// processor, heartbeat and forwarder each fail many times a second.
type asynqLogger struct{ q *quietlog.Logger }

func newAsynqLogger(l *slog.Logger) asynqLogger {
	return asynqLogger{quietlog.New(l.With(slog.String("component", "asynq")), 10*time.Second)}
}

func (a asynqLogger) log(level slog.Level, args []any) {
	msg := fmt.Sprint(args...)
	a.q.Log(context.Background(), level, messageKind(msg), msg)
}

// messageKind is what tells Asynq's lines apart: the text before the
// first colon ("Dequeue error", "Failed to write server state data"),
// which the details after it do not change.
func messageKind(msg string) string {
	kind, _, _ := strings.Cut(msg, ":")
	if len(kind) > 64 {
		kind = kind[:64]
	}
	return kind
}

func (a asynqLogger) Debug(args ...any) { a.log(slog.LevelDebug, args) }
func (a asynqLogger) Info(args ...any)  { a.log(slog.LevelInfo, args) }
func (a asynqLogger) Warn(args ...any)  { a.log(slog.LevelWarn, args) }
func (a asynqLogger) Error(args ...any) { a.log(slog.LevelError, args) }
func (a asynqLogger) Fatal(args ...any) {
	a.log(slog.LevelError, args)
	os.Exit(1)
}
