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

// issueWriteTimeout bounds one issue statement: a flush of gathered
// failures, or a success counted while its destination has an open issue
// (which delays that delivery's answer by at most this).
const issueWriteTimeout = 2 * time.Second

// issueFlushInterval is how often the failures gathered since are
// written, one statement per issue: an issue opens within it.
const issueFlushInterval = 500 * time.Millisecond

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
// place that decides what an outcome means for an issue. Failed outcomes
// are gathered in memory and written by Run every issueFlushInterval,
// one statement per issue, off the delivery path: written one by one,
// a dead destination's failures and holds (hundreds a second, all on the
// issue's one row) queued on its lock and took the connections every
// other destination's deliveries and the gateway's acks needed. A
// success costs a statement only while the destination has an open
// issue, which a cache (refreshed every Refresh by Run) answers without
// asking Postgres. An event the open circuit holds is counted once, not
// at each of its holds. Failures gathered and not yet written when a
// process dies are not counted.
type Issues struct {
	store issueStore
	cfg   IssuesConfig

	mu   sync.RWMutex
	open map[dedupe.IssueDestination]bool
	// held are the events counted in each open destination's "circuit
	// open" issue by this process.
	held map[dedupe.IssueDestination]map[string]struct{}
	// gathered are the failures not yet written, by issue.
	gathered map[issueGroup]*dedupe.IssueFailure
}

// issueGroup is what one issue gathers failures by.
type issueGroup struct {
	dest  dedupe.IssueDestination
	cause string
}

// NewIssues returns Issues kept in store (*dedupe.Store in production).
func NewIssues(store issueStore, cfg IssuesConfig) *Issues {
	return &Issues{store: store, cfg: cfg.WithDefaults(), open: map[dedupe.IssueDestination]bool{},
		held: map[dedupe.IssueDestination]map[string]struct{}{}, gathered: map[issueGroup]*dedupe.IssueFailure{}}
}

// Run writes the gathered failures every issueFlushInterval and reloads
// the destinations with an open issue every Refresh, until ctx ends. Call
// Flush after the last delivery to write what remains.
func (t *Issues) Run(ctx context.Context) {
	refresh := time.NewTicker(t.cfg.Refresh)
	defer refresh.Stop()
	flush := time.NewTicker(issueFlushInterval)
	defer flush.Stop()
	t.refresh(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-refresh.C:
			t.refresh(ctx)
		case <-flush.C:
			t.Flush(ctx)
		}
	}
}

// Flush writes the failures gathered since the last flush, one statement
// per issue. A failure that could not be written is kept for the next.
func (t *Issues) Flush(ctx context.Context) {
	t.mu.Lock()
	gathered := t.gathered
	t.gathered = map[issueGroup]*dedupe.IssueFailure{}
	t.mu.Unlock()
	for g, f := range gathered {
		wctx, cancel := context.WithTimeout(ctx, issueWriteTimeout)
		r, err := t.store.RecordIssueFailure(wctx, *f)
		cancel()
		log := t.cfg.Logger.With(slog.String("source", g.dest.Source), slog.String("destination", g.dest.Destination),
			slog.String("cause", g.cause))
		if err != nil {
			log.WarnContext(ctx, "could not count the failures in their issue; trying again", slog.Int("failures", f.Count),
				slog.String("error", err.Error()))
			t.mu.Lock()
			t.gather(g, f.Count, f.ExternalIDs...)
			t.mu.Unlock()
			continue
		}
		t.setOpen(g.dest, true)
		if r.Opened {
			log.WarnContext(ctx, "issue opened: the destination failed", slog.Int64("issue", r.ID), slog.Int("failures", f.Count))
			t.cfg.Changed()
		}
	}
}

// gather adds count failures of events to g's, keeping at most
// dedupe.MaxIssueEvents events (an issue lists no more). t.mu is held.
func (t *Issues) gather(g issueGroup, count int, events ...string) {
	f := t.gathered[g]
	if f == nil {
		f = &dedupe.IssueFailure{Source: g.dest.Source, Destination: g.dest.Destination, Cause: g.cause}
		t.gathered[g] = f
	}
	f.Count += count
	f.ExternalIDs = append(f.ExternalIDs, events[:min(len(events), dedupe.MaxIssueEvents-len(f.ExternalIDs))]...)
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
	if signal == signalFailure {
		if cause == CauseCircuitOpen && !t.firstHold(dest, p.EventID) {
			return
		}
		t.mu.Lock()
		t.gather(issueGroup{dest, cause}, 1, p.EventID)
		t.mu.Unlock()
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), issueWriteTimeout)
	defer cancel()
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
