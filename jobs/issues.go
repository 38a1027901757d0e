package jobs

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/webhookd/webhookd/dedupe"
)

// Issue causes that are not a status code (SPEC: "Issues and alerts").
const (
	// CauseTimeout: the call ran past the destination's timeout.
	CauseTimeout = "timeout"
	// CauseConnection: the call could not connect or lost its connection.
	CauseConnection = "connection"
	// CauseRule: the destination's rules failed on the event.
	CauseRule = "rule"
	// CauseCircuitOpen: the destination's circuit held the call.
	CauseCircuitOpen = "circuit open"
)

// DefaultIssueCloseAfter is how many successful calls in a row close a
// destination's open issues (issues.close_after).
const DefaultIssueCloseAfter = 10

// DefaultIssueRefresh is how often a worker reloads which destinations
// have an open issue.
const DefaultIssueRefresh = 2 * time.Second

// issueWriteTimeout bounds one issue statement: a slow database delays a
// delivery's answer by at most this.
const issueWriteTimeout = 2 * time.Second

// heldCounted bounds the events a process remembers as counted in a
// destination's "circuit open" issue; past it the memory starts over.
const heldCounted = 10_000

// issueStore is what Issues needs from dedupe.Store.
type issueStore interface {
	RecordIssueFailure(ctx context.Context, f dedupe.IssueFailure) (dedupe.IssueRecorded, error)
	RecordIssueSuccess(ctx context.Context, source, destination string, closeAfter int) (dedupe.IssueSuccess, error)
	OpenIssueDestinations(ctx context.Context) ([]dedupe.IssueDestination, error)
}

// IssuesConfig configures Issues.
type IssuesConfig struct {
	// CloseAfter is how many successful calls in a row to a destination
	// close its open issues. Defaults to DefaultIssueCloseAfter.
	CloseAfter int
	// Refresh is how often the destinations with an open issue are
	// reloaded (another worker may have opened one). Defaults to
	// DefaultIssueRefresh.
	Refresh time.Duration
	// Changed, when set, is called after an issue opened or closed (the
	// notifier's wake-up); it must not block.
	Changed func()
	// Logger receives one line per issue opened or closed. Defaults to
	// slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with zero fields set to their defaults.
func (c IssuesConfig) WithDefaults() IssuesConfig {
	if c.CloseAfter <= 0 {
		c.CloseAfter = DefaultIssueCloseAfter
	}
	if c.Refresh <= 0 {
		c.Refresh = DefaultIssueRefresh
	}
	if c.Changed == nil {
		c.Changed = func() {}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Issues opens, counts and closes issues from delivery outcomes: the one
// place that decides what an outcome means for an issue. A failed
// outcome is one upsert; a success costs a statement only while the
// destination has an open issue, which a cache (refreshed every Refresh
// by Run) answers without asking Postgres. An event the open circuit
// holds is counted once, not at each of its holds: a dead destination's
// held events come back every cooldown, and an upsert each time, all on
// the issue's one row, took the connections every other destination's
// deliveries needed.
type Issues struct {
	store issueStore
	cfg   IssuesConfig

	mu   sync.RWMutex
	open map[dedupe.IssueDestination]bool
	// held are the events counted in each open destination's "circuit
	// open" issue by this process.
	held map[dedupe.IssueDestination]map[string]struct{}
}

// NewIssues returns Issues kept in store (*dedupe.Store in production).
func NewIssues(store issueStore, cfg IssuesConfig) *Issues {
	return &Issues{store: store, cfg: cfg.WithDefaults(), open: map[dedupe.IssueDestination]bool{},
		held: map[dedupe.IssueDestination]map[string]struct{}{}}
}

// Run reloads the destinations with an open issue every Refresh until
// ctx ends.
func (t *Issues) Run(ctx context.Context) {
	tick := time.NewTicker(t.cfg.Refresh)
	defer tick.Stop()
	for {
		t.refresh(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// refresh replaces the cache of destinations with an open issue.
func (t *Issues) refresh(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, issueWriteTimeout)
	defer cancel()
	dests, err := t.store.OpenIssueDestinations(ctx)
	if err != nil {
		if ctx.Err() == nil {
			t.cfg.Logger.WarnContext(ctx, "could not reload the open issues; keeping the last answer", slog.String("error", err.Error()))
		}
		return
	}
	open := make(map[dedupe.IssueDestination]bool, len(dests))
	for _, d := range dests {
		open[d] = true
	}
	t.mu.Lock()
	t.open = open
	for d := range t.held {
		if !open[d] {
			delete(t.held, d)
		}
	}
	t.mu.Unlock()
}

// issueSignal is what one delivery outcome says about its destination.
type issueSignal int

const (
	// signalNone: nothing (held, filtered, settled without a call).
	signalNone issueSignal = iota
	signalSuccess
	signalFailure
)

// issueCause classifies a delivery's result: a successful call, a
// failure and its cause, or neither. A destination's "wait" (429, 503
// with Retry-After) is not a failure.
func issueCause(res callResult) (issueSignal, string) {
	switch {
	case res.cause != "":
		return signalFailure, res.cause
	case !res.called:
		return signalNone, ""
	case res.outcome == dedupe.OutcomeDone:
		return signalSuccess, ""
	case res.outcome != dedupe.OutcomeRetry && res.outcome != dedupe.OutcomePermanent:
		return signalNone, ""
	case res.statusCode > 0:
		return signalFailure, strconv.Itoa(res.statusCode)
	case strings.HasPrefix(res.err, "timeout"):
		return signalFailure, CauseTimeout
	}
	return signalFailure, CauseConnection
}

// observe counts p's delivery result (issueCause) toward its
// destination's issues. Errors are logged, never returned: an issue
// write does not change what happens to the delivery.
func (t *Issues) observe(ctx context.Context, log *slog.Logger, p DeliverPayload, res callResult) {
	if t == nil {
		return
	}
	signal, cause := issueCause(res)
	if signal == signalNone {
		return
	}
	dest := dedupe.IssueDestination{Source: p.Source, Destination: p.Destination}
	if signal == signalSuccess {
		t.mu.RLock()
		open := t.open[dest]
		t.mu.RUnlock()
		if !open {
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), issueWriteTimeout)
	defer cancel()
	if signal == signalFailure && cause == CauseCircuitOpen && !t.firstHold(dest, p.EventID) {
		return
	}
	if signal == signalFailure {
		r, err := t.store.RecordIssueFailure(ctx, dedupe.IssueFailure{Source: p.Source, Destination: p.Destination, Cause: cause, ExternalID: p.EventID})
		if err != nil {
			log.WarnContext(ctx, "could not count the failure in its issue", slog.String("cause", cause), slog.String("error", err.Error()))
			return
		}
		t.setOpen(dest, true)
		if r.Opened {
			log.WarnContext(ctx, "issue opened: the destination failed", slog.Int64("issue", r.ID), slog.String("cause", cause))
			t.cfg.Changed()
		}
		return
	}
	s, err := t.store.RecordIssueSuccess(ctx, p.Source, p.Destination, t.cfg.CloseAfter)
	if err != nil {
		log.WarnContext(ctx, "could not count the success toward its destination's issues", slog.String("error", err.Error()))
		return
	}
	if !s.Open {
		t.setOpen(dest, false)
	}
	for _, id := range s.Closed {
		log.InfoContext(ctx, "issue closed: the destination succeeded again", slog.Int64("issue", id), slog.Int("in_a_row", t.cfg.CloseAfter))
	}
	if len(s.Closed) > 0 {
		t.cfg.Changed()
	}
}

// setOpen records in the cache whether dest has an open issue.
func (t *Issues) setOpen(dest dedupe.IssueDestination, open bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if open {
		t.open[dest] = true
	} else {
		delete(t.open, dest)
		delete(t.held, dest)
	}
}

// firstHold reports whether the open circuit's hold of event is the
// first this process counts toward dest's issue, and remembers it.
func (t *Issues) firstHold(dest dedupe.IssueDestination, event string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	seen := t.held[dest]
	if _, ok := seen[event]; ok {
		return false
	}
	if seen == nil || len(seen) >= heldCounted {
		seen = map[string]struct{}{}
		t.held[dest] = seen
	}
	seen[event] = struct{}{}
	return true
}
