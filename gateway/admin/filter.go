package admin

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/suggest"
	"github.com/webhookd/webhookd/internal/textfield"
	"github.com/webhookd/webhookd/jobs"
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

// States lists the event states a filter may name, most pressing first
// (dedupe/state.go), as the browser offers them.
var States = []string{
	dedupe.StatusFailed, dedupe.StatusDead, dedupe.ShownRetrying, dedupe.ShownHeld, dedupe.StatusRunning,
	dedupe.StateQueued, dedupe.StateReceived, dedupe.StatusDone, dedupe.StatusSkippedStale, dedupe.StateRecordedOnly,
}

func validState(s string) bool { return slices.Contains(States, s) }

// RunStatuses lists the shown run statuses a filter may name (status=).
var RunStatuses = []string{
	dedupe.ShownQueued, dedupe.StatusRunning, dedupe.ShownRetrying, dedupe.ShownHeld, dedupe.StatusDone,
	dedupe.StatusFiltered, dedupe.StatusSkippedStale, dedupe.StatusFailed, dedupe.StatusDead,
}

// filterInput is an event filter as the API's query or JSON, the page's
// form and the CLI give it: text, validated by eventFilter.
type filterInput struct {
	Source      string `json:"source"`
	State       string `json:"state"`
	Since       string `json:"since"`
	Until       string `json:"until"`
	Q           string `json:"q"`
	Type        string `json:"type"`
	Destination string `json:"destination"`
	Status      string `json:"status"`
}

// filterField is one field of a filterInput by its name in URLs.
type filterField struct {
	name  string
	value *string
}

// fields are the filter's fields by their names in URLs (and JSON): the
// one list that reading a query and writing links go through.
func (in *filterInput) fields() []filterField {
	return []filterField{
		{"source", &in.Source}, {"state", &in.State}, {"since", &in.Since}, {"until", &in.Until},
		{"q", &in.Q}, {"type", &in.Type}, {"destination", &in.Destination}, {"status", &in.Status},
	}
}

// filterInputFrom reads a filter from URL values (a query or a form).
func filterInputFrom(v url.Values) filterInput {
	var in filterInput
	for _, f := range in.fields() {
		*f.value = v.Get(f.name)
	}
	return in
}

// values returns the filter's non-empty fields as URL values (links to
// the same filter).
func (in filterInput) values() url.Values {
	v := url.Values{}
	for _, f := range in.fields() {
		if *f.value != "" {
			v.Set(f.name, *f.value)
		}
	}
	return v
}

// Shown is the filter's non-empty fields, for a page to say what it
// selects.
func (in filterInput) Shown() map[string]string {
	out := map[string]string{}
	for k, v := range in.values() {
		out[k] = v[0]
	}
	return out
}

// eventFilter validates in and builds the storage filter: an error wraps
// ErrBadFilter (an unknown state, status, time, source or destination)
// or textfield.ErrInvalid (400). A destination ("*" means any) keeps the events of the sources
// that have it, and narrows a status to its runs.
func (a *Admin) eventFilter(in filterInput, now time.Time) (dedupe.EventFilter, error) {
	in.Q, in.Type = strings.TrimSpace(in.Q), strings.TrimSpace(in.Type)
	f := dedupe.EventFilter{
		Source: in.Source, State: in.State, IDPrefix: in.Q, Type: in.Type, Status: in.Status,
		View: a.view(),
	}
	if err := checkText(textInput{"source", in.Source, maxNameBytes}, textInput{"q", in.Q, maxIDBytes},
		textInput{"type", in.Type, maxIDBytes}, textInput{"destination", in.Destination, maxNameBytes}); err != nil {
		return f, err
	}
	if f.State != "" && !validState(f.State) {
		return f, fmt.Errorf("%w: unknown state %q (want one of %s)", ErrBadFilter, f.State, strings.Join(States, ", "))
	}
	if f.Status != "" && !slices.Contains(RunStatuses, f.Status) {
		return f, fmt.Errorf("%w: unknown run status %q (want one of %s)", ErrBadFilter, f.Status, strings.Join(RunStatuses, ", "))
	}
	if err := a.checkName("source", in.Source, a.sources()); err != nil {
		return f, err
	}
	if in.Destination != "" && in.Destination != jobs.AllDestinations {
		if err := a.checkName("destination", in.Destination, a.destinationNames()); err != nil {
			return f, err
		}
		f.Sources, f.RunDestination = a.sourcesWith(in.Destination), in.Destination
	}
	var err error
	if f.Since, err = ParseTime(in.Since, now); err != nil {
		return f, fmt.Errorf("since: %w", err)
	}
	if f.Until, err = ParseTime(in.Until, now); err != nil {
		return f, fmt.Errorf("until: %w", err)
	}
	f.InPayload = payloadSearchable(f, now)
	return f, nil
}

// MaxPayloadSearch is the widest window (since to until, or to now) in
// which q also matches inside payloads: no index holds payloads, so such
// a search reads every event of its window, and a search without since
// or with a wider window matches ids only (it cannot scan the whole table
// unasked).
const MaxPayloadSearch = 7 * 24 * time.Hour

// payloadSearchable reports whether f's q also matches inside payloads:
// it has a q and a since no further than MaxPayloadSearch before its end.
func payloadSearchable(f dedupe.EventFilter, now time.Time) bool {
	if f.IDPrefix == "" || f.Since.IsZero() {
		return false
	}
	end := now
	if !f.Until.IsZero() {
		end = f.Until
	}
	return end.Sub(f.Since) <= MaxPayloadSearch
}

// checkName refuses a filter's source or destination name that is not
// configured (ErrBadFilter, 400), naming the closest and the valid ones:
// a typo would otherwise read "0 events match". No name, or no
// configuration to check against, passes.
func (a *Admin) checkName(kind, name string, configured []string) error {
	if name == "" || len(configured) == 0 || slices.Contains(configured, name) {
		return nil
	}
	return fmt.Errorf("%w: unknown %s %q%s (configured: %s)", ErrBadFilter, kind, name,
		suggest.DidYouMean(name, configured), strings.Join(configured, ", "))
}

// sourcesWith returns the sources that have a destination named name,
// sorted; empty (not nil) when none has.
func (a *Admin) sourcesWith(name string) []string {
	out := []string{}
	for _, src := range a.sources() {
		if _, ok := a.routes()[src][name]; ok {
			out = append(out, src)
		}
	}
	return out
}

// destinationNames returns every destination name of every source,
// sorted, once each.
func (a *Admin) destinationNames() []string {
	var out []string
	for _, dests := range a.routes() {
		for n := range dests {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return out
}

// ParseTime reads a filter time: RFC 3339 ("2026-01-02T15:04:05Z"), a
// date-time without zone as the browser's datetime-local sends it (taken
// as UTC), a date, or a duration meaning that long before now ("24h",
// "30m", "2d", "1w"). Empty gives the zero time (no bound). A time before 1970 is
// refused (ErrBadFilter): no event was received then, and the zero time
// (0001-01-01) would mean no bound at all.
func ParseTime(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := parseAgo(s); err == nil && d >= 0 {
		return checkFilterTime(s, now.Add(-d))
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return checkFilterTime(s, t)
		}
	}
	return time.Time{}, fmt.Errorf("%w: %q is neither a time (2006-01-02T15:04:05Z) nor a duration (24h, 2d, 1w)", ErrBadFilter, s)
}

// parseAgo reads a duration as Go writes it ("90m", "24h") or a whole
// number of days or weeks ("2d", "1w"), which Go's durations lack and an
// operator looking back at events means most often.
func parseAgo(s string) (time.Duration, error) {
	for suffix, unit := range map[string]time.Duration{"d": 24 * time.Hour, "w": 7 * 24 * time.Hour} {
		if n, ok := strings.CutSuffix(s, suffix); ok {
			days, err := strconv.Atoi(n)
			if err != nil || days < 0 || days > 100*365 {
				return 0, fmt.Errorf("%q is not a whole number of %s", s, suffix)
			}
			return time.Duration(days) * unit, nil
		}
	}
	return time.ParseDuration(s)
}

// checkFilterTime refuses a filter time before 1970.
func checkFilterTime(s string, t time.Time) (time.Time, error) {
	if t.Before(time.Unix(0, 0)) {
		return time.Time{}, fmt.Errorf("%w: %q is before 1970", ErrBadFilter, s)
	}
	return t, nil
}
