package admin

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/webhookd/webhookd/dedupe"
)

// ErrBadFilter is returned for a filter value that cannot be understood
// (an unknown state, a time that does not parse).
var ErrBadFilter = errors.New("invalid filter")

// States lists the event states a filter may name, in the order the
// browser offers them.
var States = []string{
	dedupe.StateReceived, dedupe.StateQueued, dedupe.StatusRunning, dedupe.StatusDone,
	dedupe.StatusFailed, dedupe.StatusDead, dedupe.StatusSkippedStale,
}

func validState(s string) bool {
	for _, v := range States {
		if v == s {
			return true
		}
	}
	return false
}

// ParseTime reads a filter time: RFC 3339 ("2026-01-02T15:04:05Z"), a
// date-time without zone as the browser's datetime-local sends it (taken
// as UTC), a date, or a duration meaning that long before now ("24h",
// "30m"). Empty gives the zero time (no bound).
func ParseTime(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%w: %q is neither a time (2006-01-02T15:04:05Z) nor a duration (24h)", ErrBadFilter, s)
}
