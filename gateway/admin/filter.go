package admin

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway/textfield"
)

// ErrBadFilter is returned for a filter value that cannot be understood
// (an unknown state, a time that does not parse).
var ErrBadFilter = errors.New("invalid filter")

// Bounds of the text an admin request brings: names (sources,
// destinations), event ids, cursors, and the by and reason a replay
// records.
const (
	maxNameBytes   = 128
	maxIDBytes     = 1024
	maxCursorBytes = 2048
	maxNoteBytes   = 1024
)

// textInput is one text value of an admin request, named for errors.
type textInput struct {
	name, value string
	max         int
}

// checkText returns nil when every value is one line of UTF-8 text within
// its bound, else an error naming the first that is not, wrapping
// textfield.ErrInvalid (400). Values reach Postgres text columns and log
// lines; Postgres refuses NUL and invalid UTF-8.
func checkText(inputs ...textInput) error {
	for _, in := range inputs {
		if err := textfield.CheckLine(in.value, in.max); err != nil {
			return fmt.Errorf("%s: %w", in.name, err)
		}
	}
	return nil
}

// States lists the event states a filter may name, in the order the
// browser offers them.
var States = []string{
	dedupe.StateReceived, dedupe.StateQueued, dedupe.StatusRunning, dedupe.StatusDone,
	dedupe.StatusFailed, dedupe.StatusDead, dedupe.StatusSkippedStale, dedupe.StateRecordedOnly,
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
