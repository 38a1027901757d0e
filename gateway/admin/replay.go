package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/jobs"
)

var (
	// ErrEnqueueFailed is returned when a replay was recorded but could
	// not be handed to the queue (Redis down). The run is visible on the
	// event; replaying it again (without force) enqueues it.
	ErrEnqueueFailed = errors.New("replay recorded but not enqueued; replay again without force once the queue answers")
	// ErrBadReplay is returned for a replay request that cannot be acted
	// on as asked: a forced replay that names no destination (a name, or
	// AllDestinations) or gives no reason (400).
	ErrBadReplay = errors.New("invalid replay request")
)

// AllDestinations, as a replay's destination, names every destination of
// the event's source; a forced replay must name its destinations, this
// or one name.
const AllDestinations = "*"

// Replay actions, per destination, as reported in RunReplay.Action.
const (
	// ActionStoredResult: the run is done; its stored result is returned
	// and nothing is called.
	ActionStoredResult = "stored_result"
	// ActionRequeued: a failed or dead run was reopened and enqueued with
	// the same key.
	ActionRequeued = "requeued"
	// ActionEnqueued: the destination had no run yet; its first one was
	// enqueued.
	ActionEnqueued = "enqueued"
	// ActionForced: a new generation (<key>#N) was recorded and enqueued.
	ActionForced = "forced"
	// ActionInProgress: a run is running (or was just claimed); nothing
	// was done.
	ActionInProgress = "in_progress"
	// ActionSkippedStale: the run was skipped because a newer version of
	// the entity was forwarded; only a forced replay sends it.
	ActionSkippedStale = "skipped_stale"
)

// ReplayRequest asks to replay one event.
type ReplayRequest struct {
	Source  string
	EventID string
	// Destination limits the replay to one destination; empty or
	// AllDestinations means all.
	Destination string
	// Force starts a new generation even for a done run. It must name
	// its Destination (a name or AllDestinations) and give a Reason: a
	// forced replay sends again to destinations that are done.
	Force bool
	// By and Reason are recorded on the run and in the audit log line.
	// By defaults to "admin".
	By, Reason string
}

// checkForce returns ErrBadReplay when a forced replay does not name its
// destinations or give a reason.
func checkForce(force bool, destination, reason string) error {
	switch {
	case !force:
		return nil
	case destination == "":
		return fmt.Errorf("%w: a forced replay sends again, even to destinations that are done: name destination=<name>, or destination=%s for all", ErrBadReplay, AllDestinations)
	case strings.TrimSpace(reason) == "":
		return fmt.Errorf("%w: a forced replay needs a reason (recorded on the run)", ErrBadReplay)
	}
	return nil
}

// ReplayResult says what a replay did, per destination.
type ReplayResult struct {
	Source  string `json:"source"`
	EventID string `json:"event_id"`
	// Enqueued is true when at least one destination's run was enqueued.
	Enqueued bool        `json:"enqueued"`
	Runs     []RunReplay `json:"runs"`
}

// RunReplay is what a replay did for one destination.
type RunReplay struct {
	Destination string `json:"destination"`
	Key         string `json:"key"`
	Generation  int    `json:"generation"`
	// Action is one of the Action constants.
	Action string `json:"action"`
	// Status is the run's status after the replay.
	Status string `json:"status"`
	// Result is the stored result of a done run.
	Result json.RawMessage `json:"result,omitempty"`
	// Error says why the enqueue failed, if it did.
	Error string `json:"error,omitempty"`
}

// replay replays one event: per destination, a done run answers with its
// stored result and calls nothing; a failed or dead run is reopened
// (attempts reset to 0) and enqueued with the same key; a destination
// without a run gets its first one; with Force, a new generation is
// recorded and enqueued. It returns dedupe.ErrNotFound for an unknown
// event, jobs.ErrUnknownSource or jobs.ErrUnknownDestination, and ErrEnqueueFailed
// (with the result filled in) when Redis did not take the task.
func (a *Admin) replay(ctx context.Context, log *slog.Logger, req ReplayRequest) (ReplayResult, error) {
	if req.By == "" {
		req.By = "admin"
	}
	res := ReplayResult{Source: req.Source, EventID: req.EventID}
	if err := checkText(textInput{"source", req.Source, maxNameBytes}, textInput{"event id", req.EventID, maxIDBytes},
		textInput{"destination", req.Destination, maxNameBytes}, textInput{"by", req.By, maxNoteBytes},
		textInput{"reason", req.Reason, maxNoteBytes}); err != nil {
		return res, err
	}
	if err := checkForce(req.Force, req.Destination, req.Reason); err != nil {
		return res, err
	}
	dests, err := a.destinations(req.Source)
	if err != nil {
		return res, err
	}
	if req.Destination != "" && req.Destination != AllDestinations {
		if !slices.Contains(dests, req.Destination) {
			return res, fmt.Errorf("%w: %s", jobs.ErrUnknownDestination, req.Destination)
		}
		dests = []string{req.Destination}
	}
	ev, err := a.events.GetEvent(ctx, req.Source, req.EventID, len(a.cfg.Routes[req.Source]), a.cfg.Routes.DestinationFilters()...)
	if err != nil {
		return res, err
	}
	if req.Destination == "" {
		// Every destination means every one that wants the event's
		// type; a destination named on purpose is replayed whatever its
		// filter says.
		dests = slices.DeleteFunc(dests, func(d string) bool { return !a.cfg.Routes[req.Source][d].Filter.Wants(ev.EventType) })
	}
	latest := latestRuns(ev.Runs)
	log = log.With(slog.String("source", req.Source), slog.String("event_id", req.EventID),
		slog.Int("deliveries", ev.Deliveries), slog.String("by", req.By), slog.String("reason", req.Reason))

	var enqueueErr error
	for _, dest := range dests {
		rr, err := a.replayDestination(ctx, log, req, dest, latest[dest])
		if err != nil {
			if !errors.Is(err, ErrEnqueueFailed) {
				return res, err
			}
			enqueueErr = err
		}
		if rr.Action == ActionRequeued || rr.Action == ActionEnqueued || rr.Action == ActionForced {
			res.Enqueued = res.Enqueued || rr.Error == ""
		}
		res.Runs = append(res.Runs, rr)
	}
	return res, enqueueErr
}

// latestRuns returns the run of the highest generation per destination.
func latestRuns(runs []dedupe.Run) map[string]*dedupe.Run {
	m := make(map[string]*dedupe.Run)
	for i := range runs {
		r := &runs[i]
		if cur, ok := m[r.Destination]; !ok || r.Generation > cur.Generation {
			m[r.Destination] = r
		}
	}
	return m
}

func (a *Admin) replayDestination(ctx context.Context, log *slog.Logger, req ReplayRequest, dest string, run *dedupe.Run) (RunReplay, error) {
	p := jobs.DeliverPayload{Source: req.Source, EventID: req.EventID, Destination: dest}
	rr := RunReplay{Destination: dest, Key: p.Key(), Generation: 1}
	if run != nil {
		rr.Key, rr.Generation, rr.Status = run.Key, run.Generation, run.Status
		p.Generation = run.Generation
	}

	switch {
	case req.Force:
		nr, err := a.runs.NewGeneration(ctx, dedupe.NewGeneration{
			Source: req.Source, ExternalID: req.EventID, Destination: dest,
			MaxAttempts: a.cfg.Routes[req.Source][dest].WithDefaults().MaxAttempts,
			By:          req.By, Reason: req.Reason,
			KeyFunc: func(gen int) string { return jobs.Key(req.Source, dest, req.EventID, gen) },
		})
		if err != nil {
			return rr, err
		}
		rr.Key, rr.Generation, rr.Status, rr.Action = nr.Key, nr.Generation, nr.Status, ActionForced
		p.Generation = nr.Generation
		log.InfoContext(ctx, "forced replay recorded: new generation",
			slog.String("key", nr.Key), slog.Int("generation", nr.Generation), slog.String("destination", dest))
	case run == nil:
		opened, ok, err := a.runs.OpenFirstRun(ctx, dedupe.FirstRun{
			Key: rr.Key, Source: req.Source, ExternalID: req.EventID, Destination: dest,
			MaxAttempts: a.cfg.Routes[req.Source][dest].WithDefaults().MaxAttempts,
			By:          req.By, Reason: req.Reason,
		})
		if err != nil {
			return rr, err
		}
		rr.Status = opened.Status
		if !ok {
			rr.Action = ActionInProgress
			return rr, nil
		}
		rr.Action = ActionEnqueued
	case run.Status == dedupe.StatusDone:
		rr.Action, rr.Result = ActionStoredResult, json.RawMessage(run.Result)
		log.InfoContext(ctx, "replay answered from the stored result; nothing called",
			slog.String("key", run.Key), slog.Int("generation", run.Generation), slog.String("destination", dest))
		return rr, nil
	case run.Status == dedupe.StatusSkippedStale:
		rr.Action = ActionSkippedStale
		return rr, nil
	case run.Status == dedupe.StatusRunning:
		rr.Action = ActionInProgress
		return rr, nil
	default: // failed or dead
		reopened, ok, err := a.runs.ReopenRun(ctx, run.Key, req.By, req.Reason)
		if err != nil {
			return rr, err
		}
		rr.Status = reopened.Status
		if !ok {
			rr.Action = ActionInProgress
			if reopened.Status == dedupe.StatusDone {
				rr.Action, rr.Result = ActionStoredResult, json.RawMessage(reopened.Result)
			}
			return rr, nil
		}
		rr.Action = ActionRequeued
		log.InfoContext(ctx, "replay reopened the run with the same key",
			slog.String("key", run.Key), slog.Int("generation", run.Generation), slog.String("destination", dest),
			slog.String("previous_status", run.Status), slog.Int("attempts", run.Attempts))
	}

	if err := a.queue.Requeue(ctx, p); err != nil {
		rr.Error = err.Error()
		log.ErrorContext(ctx, "replay could not be enqueued", slog.String("key", rr.Key),
			slog.Int("generation", rr.Generation), slog.String("error", err.Error()))
		return rr, fmt.Errorf("%w: %s", ErrEnqueueFailed, rr.Key)
	}
	log.InfoContext(ctx, "replay enqueued", slog.String("key", rr.Key), slog.Int("generation", rr.Generation),
		slog.String("destination", dest), slog.String("action", rr.Action))
	return rr, nil
}

// bulkRequest asks to replay the events matching a filter.
type bulkRequest struct {
	// filter selects events as in the listing; its destination is also
	// where to replay (empty or AllDestinations: every one that needs
	// it).
	filter filterInput
	// cursor continues after the previous call's last event.
	cursor string
	// limit caps the events this call acts on. Defaults to 100; at most
	// Config.BulkLimit.
	limit int
	// dryRun only counts and lists what would be replayed.
	dryRun bool
	// force, by and reason are as in ReplayRequest.
	force      bool
	by, reason string
}

// BulkResult says what a bulk replay did (or would do).
type BulkResult struct {
	DryRun bool `json:"dry_run"`
	// Matched counts the events matching the filter (not only this
	// page), among the newest 10,000 of the filter's time range.
	Matched int64 `json:"matched"`
	// MatchedAtLeast is true when the count stopped at 10,000 events
	// examined: at least Matched match.
	MatchedAtLeast bool `json:"matched_at_least,omitempty"`
	// Limit is the cap that applied to this call.
	Limit int `json:"limit"`
	// Selected counts the events this call covered (at most Limit; with
	// a state filter it may be fewer, even none, when Next is set: the
	// listing examines a bounded stretch of events per call).
	Selected int `json:"selected"`
	// Enqueued counts events with at least one run enqueued.
	Enqueued int `json:"enqueued"`
	// Failed counts events whose replay returned an error.
	Failed int          `json:"failed"`
	Events []BulkReplay `json:"events"`
	// Next continues with the following events; empty when none remain.
	Next string `json:"next_cursor,omitempty"`
}

// eventCount is the count a bulk result carries.
func eventCount(r BulkResult) dedupe.EventCount {
	return dedupe.EventCount{Matched: r.Matched, Complete: !r.MatchedAtLeast}
}

// defaultBulkLimit is a bulk replay's cap when the request names none.
const defaultBulkLimit = 100

// BulkReplay is one event of a bulk replay.
type BulkReplay struct {
	Source    string      `json:"source"`
	EventID   string      `json:"event_id"`
	EventType string      `json:"event_type,omitempty"`
	State     string      `json:"state"`
	Runs      []RunReplay `json:"runs,omitempty"`
	Error     string      `json:"error,omitempty"`
}

// bulkReplayWith replays up to a capped number of events matching the
// filter, newest first, one after the other; with dryRun it only counts
// and lists them. Continue with BulkResult.Next.
func (a *Admin) bulkReplayWith(ctx context.Context, log *slog.Logger, req bulkRequest) (BulkResult, error) {
	limit := req.limit
	if limit <= 0 {
		limit = min(defaultBulkLimit, a.cfg.BulkLimit)
	}
	limit = min(limit, a.cfg.BulkLimit)
	if err := checkText(textInput{"cursor", req.cursor, maxCursorBytes},
		textInput{"by", req.by, maxNoteBytes}, textInput{"reason", req.reason, maxNoteBytes}); err != nil {
		return BulkResult{}, err
	}
	if err := checkForce(req.force, req.filter.Destination, req.reason); err != nil {
		return BulkResult{}, err
	}
	f, err := a.eventFilter(req.filter, time.Now())
	if err != nil {
		return BulkResult{}, err
	}
	if req.filter.Source != "" {
		if _, err := a.destinations(req.filter.Source); err != nil {
			return BulkResult{}, err
		}
	}
	f.Cursor, f.Limit = req.cursor, limit
	matched, err := a.events.CountEvents(ctx, f)
	if err != nil {
		return BulkResult{}, err
	}
	page, err := a.events.ListEvents(ctx, f)
	if err != nil {
		return BulkResult{}, err
	}
	out := BulkResult{DryRun: req.dryRun, Matched: matched.Matched, MatchedAtLeast: !matched.Complete, Limit: limit,
		Selected: len(page.Events), Events: []BulkReplay{}, Next: page.Next}
	log.InfoContext(ctx, "bulk replay", slog.Bool("dry_run", req.dryRun), slog.Bool("force", req.force),
		slog.Any("filter", req.filter.values()), slog.Int64("matched", matched.Matched),
		slog.Bool("matched_at_least", !matched.Complete),
		slog.Int("selected", len(page.Events)), slog.String("by", req.by), slog.String("reason", req.reason))
	for _, ev := range page.Events {
		br := BulkReplay{Source: ev.Source, EventID: ev.ExternalID, EventType: ev.EventType, State: ev.State}
		if !req.dryRun {
			res, err := a.replay(ctx, log, ReplayRequest{
				Source: ev.Source, EventID: ev.ExternalID, Destination: req.filter.Destination, Force: req.force, By: req.by, Reason: req.reason,
			})
			br.Runs = res.Runs
			if err != nil {
				br.Error = err.Error()
				out.Failed++
			}
			if res.Enqueued {
				out.Enqueued++
			}
		}
		out.Events = append(out.Events, br)
	}
	return out, nil
}
