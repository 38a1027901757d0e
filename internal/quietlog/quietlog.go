// Package quietlog carries the lines of chatty dependencies (Asynq,
// go-redis) into slog, at most one line per kind of message per
// interval: while Redis is down they retry many times a second, and each
// failure would otherwise be a line. The first line of a kind is written
// at once; the next one after a quiet spell says how many were left out.
package quietlog

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// maxKinds bounds the kinds remembered; later kinds share one.
const maxKinds = 256

// Logger writes rate-limited lines to a slog.Logger.
type Logger struct {
	log      *slog.Logger
	interval time.Duration

	mu    sync.Mutex
	kinds map[string]*kind
}

type kind struct {
	every      rate.Sometimes
	suppressed int
}

// New returns a Logger writing to log at most one line per kind every
// interval.
func New(log *slog.Logger, interval time.Duration) *Logger {
	return &Logger{log: log, interval: interval, kinds: map[string]*kind{}}
}

// Log writes msg at level with attrs, unless a line of the same kind
// was written less than the interval ago; then it only counts it.
func (l *Logger) Log(ctx context.Context, level slog.Level, kindOf, msg string, attrs ...slog.Attr) {
	if !l.log.Enabled(ctx, level) {
		return
	}
	l.mu.Lock()
	k, ok := l.kinds[kindOf]
	if !ok {
		if len(l.kinds) >= maxKinds {
			kindOf = "other"
		}
		if k, ok = l.kinds[kindOf]; !ok {
			k = &kind{every: rate.Sometimes{Interval: l.interval}}
			l.kinds[kindOf] = k
		}
	}
	written, suppressed := false, 0
	k.every.Do(func() {
		written, suppressed = true, k.suppressed
		k.suppressed = 0
	})
	if !written {
		k.suppressed++
	}
	l.mu.Unlock()
	if !written {
		return
	}
	if suppressed > 0 {
		attrs = append(attrs, slog.Int("suppressed", suppressed), slog.Duration("suppressed_over", l.interval))
	}
	l.log.LogAttrs(ctx, level, msg, attrs...)
}
