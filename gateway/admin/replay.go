package admin

import (
	"context"
	"log/slog"
	"time"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/jobs"
)

// replayer runs replays; *jobs.Replayer satisfies it. What a replay does
// is decided there; admin checks the request at the edge and renders the
// result.
type replayer interface {
	Replay(ctx context.Context, req jobs.ReplayRequest) (jobs.ReplayResult, error)
	Bulk(ctx context.Context, req jobs.BulkRequest) (jobs.BulkResult, error)
	Skip(ctx context.Context, req jobs.SkipRequest) (jobs.SkipResult, error)
}

// replay checks req's text at the edge and replays the event, logging to
// log (the request's logger). Its errors are the Replayer's, or wrap
// textfield.ErrInvalid (400).
func (a *Admin) replay(ctx context.Context, log *slog.Logger, req jobs.ReplayRequest) (jobs.ReplayResult, error) {
	if err := checkText(textInput{"source", req.Source, maxNameBytes}, textInput{"event id", req.EventID, maxIDBytes},
		textInput{"destination", req.Destination, maxNameBytes}, textInput{"by", req.By, maxNoteBytes},
		textInput{"reason", req.Reason, maxNoteBytes}); err != nil {
		return jobs.ReplayResult{Source: req.Source, EventID: req.EventID}, err
	}
	return a.replays.Replay(jobs.WithLogger(ctx, log), req)
}

// skip checks req's text at the edge and skips the event's run, logging
// to log (the request's logger). Its errors are the Replayer's, or wrap
// textfield.ErrInvalid (400).
func (a *Admin) skip(ctx context.Context, log *slog.Logger, req jobs.SkipRequest) (jobs.SkipResult, error) {
	if err := checkText(textInput{"source", req.Source, maxNameBytes}, textInput{"event id", req.EventID, maxIDBytes},
		textInput{"destination", req.Destination, maxNameBytes}, textInput{"by", req.By, maxNoteBytes},
		textInput{"reason", req.Reason, maxNoteBytes}); err != nil {
		return jobs.SkipResult{Source: req.Source, EventID: req.EventID}, err
	}
	return a.replays.Skip(jobs.WithLogger(ctx, log), req)
}

// bulkRequest asks to replay the events matching a filter, as the API
// and the page give it.
type bulkRequest struct {
	// filter selects events as in the listing; its destination is also
	// where to replay (empty or jobs.AllDestinations: every one that
	// needs it).
	filter filterInput
	// cursor continues after the previous call's last event.
	cursor string
	// limit caps the events this call acts on. Defaults to 100; at most
	// Config.BulkLimit.
	limit int
	// dryRun only counts and lists what would be replayed.
	dryRun bool
	// force, by and reason are as in jobs.ReplayRequest.
	force      bool
	by, reason string
}

// defaultBulkLimit is a bulk replay's cap when the request names none.
const defaultBulkLimit = 100

// bulkReplayWith checks req at the edge (its text, its filter, its
// limit against Config.BulkLimit) and runs the bulk replay, logging to
// log (the request's logger). Its errors are the Replayer's, or wrap
// ErrBadFilter or textfield.ErrInvalid (400).
func (a *Admin) bulkReplayWith(ctx context.Context, log *slog.Logger, req bulkRequest) (jobs.BulkResult, error) {
	limit := req.limit
	if limit <= 0 {
		limit = min(defaultBulkLimit, a.cfg.BulkLimit)
	}
	limit = min(limit, a.cfg.BulkLimit)
	if err := checkText(textInput{"cursor", req.cursor, maxCursorBytes},
		textInput{"by", req.by, maxNoteBytes}, textInput{"reason", req.reason, maxNoteBytes}); err != nil {
		return jobs.BulkResult{}, err
	}
	f, err := a.eventFilter(req.filter, time.Now())
	if err != nil {
		return jobs.BulkResult{}, err
	}
	return a.replays.Bulk(jobs.WithLogger(ctx, log), jobs.BulkRequest{
		Filter: f, Destination: req.filter.Destination, Cursor: req.cursor, Limit: limit,
		DryRun: req.dryRun, Force: req.force, By: req.by, Reason: req.reason,
	})
}

// eventCount is the count a bulk result carries.
func eventCount(r jobs.BulkResult) dedupe.EventCount {
	return dedupe.EventCount{Matched: r.Matched, Complete: !r.MatchedAtLeast}
}
