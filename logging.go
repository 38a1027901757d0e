package webhookd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"

	"github.com/webhookd/webhookd/internal/quietlog"
)

// NewLogger returns the JSON logger of a webhookd process, writing
// lines at level and above to w. Durations are written as text ("1.5s",
// "250ms"), never as nanosecond integers.
func NewLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: durationText}))
}

// durationText writes a time.Duration value as text.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}

// RouteRedisLogs carries go-redis's own lines (dial failures, pool
// timeouts, Sentinel and Cluster topology changes), which it writes as
// plain text to stderr by default, into log as warnings tagged component
// redis, at most one line of a kind every 10s. go-redis has one logger
// per program (redis.SetLogger), so this is called once, by main.
func RouteRedisLogs(log *slog.Logger) {
	redis.SetLogger(redisLogger{quietlog.New(log.With(slog.String("component", "redis")), 10*time.Second)})
}

// redisLogger adapts quietlog to go-redis's logging interface; the
// format string tells its lines apart.
type redisLogger struct{ q *quietlog.Logger }

func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	r.q.Log(ctx, slog.LevelWarn, format, fmt.Sprintf(format, v...))
}

// RouteTracingLogs carries OpenTelemetry's own lines (an export that
// failed, a collector out of reach), which it writes as plain text to
// stderr by default, into log as warnings tagged component tracing, at
// most one line of a kind every 10s. OpenTelemetry has one error handler
// and one logger per program, so this is called once, by main.
func RouteTracingLogs(log *slog.Logger) {
	log = log.With(slog.String("component", "tracing"))
	q := quietlog.New(log, 10*time.Second)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		msg := err.Error()
		// The kind is the message up to its first detail, so a collector
		// refusing every export is one line per interval.
		kind, _, _ := strings.Cut(msg, ":")
		q.Log(context.Background(), slog.LevelWarn, kind, "tracing: "+msg)
	}))
	// Its informational lines are debug here; errors go to the handler.
	otel.SetLogger(logr.FromSlogHandler(log.Handler()))
}
