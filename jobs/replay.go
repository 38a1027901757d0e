package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/webhookd/webhookd/dedupe"
)

var (
	// ErrEnqueueFailed is returned when a replay was recorded but could
	// not be handed to the queue (Redis down). The run is visible on the
	// event; replaying it again (without force) enqueues it.
	ErrEnqueueFailed = errors.New("replay recorded but not enqueued; replay again without force once the queue answers")
	// ErrBadReplay is returned for a replay request that cannot be acted
	// on as asked: a forced replay that names no destination (a name, or
	// AllDestinations) or gives no reason, or a bulk replay without a
	// positive limit.
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

// eventReader reads the events a replay acts on; *dedupe.Store satisfies
// it.
type eventReader interface {
	GetEvent(ctx context.Context, source, externalID string, view dedupe.DestinationView) (dedupe.EventDetail, error)
	ListEvents(ctx context.Context, f dedupe.EventFilter) (dedupe.EventPage, error)
	CountEvents(ctx context.Context, f dedupe.EventFilter) (dedupe.EventCount, error)
}

// runOpener records what a replay does to a destination's runs;
// *dedupe.Store satisfies it.
type runOpener interface {
	ReopenRun(ctx context.Context, key, by, reason string) (dedupe.Run, bool, error)
	OpenFirstRun(ctx context.Context, r dedupe.FirstRun) (dedupe.Run, bool, error)
	NewGeneration(ctx context.Context, g dedupe.NewGeneration) (dedupe.Run, error)
	SkipRun(ctx context.Context, key, by, reason string) (dedupe.Run, bool, error)
	holdReleaser
}

// replayStore is what a Replayer needs from dedupe.Store.
type replayStore interface {
	eventReader
	runOpener
}

// requeuer puts a key's task on the queue so that it runs, or wakes the
// waiting tasks of keys (a skip's successors); *Enqueuer satisfies it.
type requeuer interface {
	Requeue(ctx context.Context, p DeliverPayload) error
	taskWaker
}

// ReplayerConfig configures a Replayer.
type ReplayerConfig struct {
	// Logger receives the replays' audit lines when the context carries
	// no logger (WithLogger). Defaults to slog.Default().
	Logger *slog.Logger
}

// Replayer replays recorded events to their destinations, by id or by
// filter: the one place that says what a replay does (see the package
// doc's Replay section). The admin API, its pages and, through the API,
// the CLI call it.
type Replayer struct {
	store  replayStore
	queue  requeuer
	routes RouteSource
	log    *slog.Logger
}

// NewReplayer returns a Replayer of the events in store (*dedupe.Store in
// production) to the destinations of routes, enqueuing through queue
// (*Enqueuer in production).
func NewReplayer(store replayStore, queue requeuer, routes RouteSource, cfg ReplayerConfig) *Replayer {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Replayer{store: store, queue: queue, routes: routes, log: cfg.Logger}
}

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

// Replay replays one event: per destination, a done run answers with its
// stored result and calls nothing; a failed or dead run is reopened
// (attempts reset to 0) and enqueued with the same key; a destination
// without a run gets its first one; with Force, a new generation is
// recorded and enqueued. Without a named destination, only the
// destinations whose filter wants the event's type are replayed. Lines go
// to the context's logger (WithLogger). It returns ErrBadReplay for a
// forced replay that names no destination or reason, dedupe.ErrNotFound
// for an unknown event, ErrUnknownSource or ErrUnknownDestination,
// dedupe.ErrTooSlow when the database did not answer in time, and
// ErrEnqueueFailed (with the result filled in) when Redis did not take
// the task.
func (r *Replayer) Replay(ctx context.Context, req ReplayRequest) (ReplayResult, error) {
	if req.By == "" {
		req.By = "admin"
	}
	res := ReplayResult{Source: req.Source, EventID: req.EventID}
	if err := checkForce(req.Force, req.Destination, req.Reason); err != nil {
		return res, err
	}
	dests, err := r.routes.Load().DestinationNames(req.Source)
	if err != nil {
		return res, err
	}
	if req.Destination != "" && req.Destination != AllDestinations {
		if !slices.Contains(dests, req.Destination) {
			return res, fmt.Errorf("%w: %s", ErrUnknownDestination, req.Destination)
		}
		dests = []string{req.Destination}
	}
	ev, err := r.store.GetEvent(ctx, req.Source, req.EventID, dedupe.DestinationView{})
	if err != nil {
		return res, err
	}
	if req.Destination == "" {
		// Every destination means every one the event was planned for;
		// a destination named on purpose is replayed whatever its plan
		// or filter says (a backfill, when it was added since).
		dests = r.plan(ev)
	}
	latest := latestRuns(ev.Runs)
	log := loggerFrom(ctx, r.log).With(slog.String("source", req.Source), slog.String("event_id", req.EventID),
		slog.Int("deliveries", ev.Deliveries), slog.String("by", req.By), slog.String("reason", req.Reason))

	var enqueueErr error
	for _, dest := range dests {
		rr, err := r.replayDestination(ctx, log, req, dest, latest[dest])
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

// plan returns the configured destinations ev was planned for: its plan
// as kept, or, for an event recorded before plans were kept (or recorded
// only, by an import), the destinations its runs name, or, without runs,
// the configuration's answer for its type.
func (r *Replayer) plan(ev dedupe.EventDetail) []string {
	routes := r.routes.Load()
	plan := ev.Plan
	if plan == nil {
		for _, run := range ev.Runs {
			if !slices.Contains(plan, run.Destination) {
				plan = append(plan, run.Destination)
			}
		}
		if plan == nil {
			plan = routes.Plan(ev.Source, ev.EventType)
		}
	}
	return slices.DeleteFunc(slices.Clone(plan), func(d string) bool {
		_, configured := routes[ev.Source][d]
		return !configured
	})
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

// replayDestination replays the event of req to dest, whose latest run
// is run (nil when it has none), and logs what it did.
func (r *Replayer) replayDestination(ctx context.Context, log *slog.Logger, req ReplayRequest, dest string, run *dedupe.Run) (RunReplay, error) {
	p := DeliverPayload{Source: req.Source, EventID: req.EventID, Destination: dest}
	rr := RunReplay{Destination: dest, Key: p.Key(), Generation: 1}
	if run != nil {
		rr.Key, rr.Generation, rr.Status = run.Key, run.Generation, run.Status
		p.Generation = run.Generation
	}
	maxAttempts := r.routes.Load()[req.Source][dest].MaxAttempts

	switch {
	case req.Force:
		// The generation is chosen inside dedupe's transaction (under a
		// lock on the event), and the key it inserts is Key's.
		nr, err := r.store.NewGeneration(ctx, dedupe.NewGeneration{
			Source: req.Source, ExternalID: req.EventID, Destination: dest,
			MaxAttempts: maxAttempts, By: req.By, Reason: req.Reason,
			KeyFunc: func(gen int) string { return Key(req.Source, dest, req.EventID, gen) },
		})
		if err != nil {
			return rr, err
		}
		rr.Key, rr.Generation, rr.Status, rr.Action = nr.Key, nr.Generation, nr.Status, ActionForced
		p.Generation = nr.Generation
		log.InfoContext(ctx, "forced replay recorded: new generation",
			slog.String("key", nr.Key), slog.Int("generation", nr.Generation), slog.String("destination", dest))
	case run == nil:
		opened, ok, err := r.store.OpenFirstRun(ctx, dedupe.FirstRun{
			Key: rr.Key, Source: req.Source, ExternalID: req.EventID, Destination: dest,
			MaxAttempts: maxAttempts, By: req.By, Reason: req.Reason,
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
		reopened, ok, err := r.store.ReopenRun(ctx, run.Key, req.By, req.Reason)
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

	if err := r.queue.Requeue(ctx, p); err != nil {
		rr.Error = err.Error()
		log.ErrorContext(ctx, "replay could not be enqueued", slog.String("key", rr.Key),
			slog.Int("generation", rr.Generation), slog.String("error", err.Error()))
		return rr, fmt.Errorf("%w: %s", ErrEnqueueFailed, rr.Key)
	}
	log.InfoContext(ctx, "replay enqueued", slog.String("key", rr.Key), slog.Int("generation", rr.Generation),
		slog.String("destination", dest), slog.String("action", rr.Action))
	return rr, nil
}

// BulkRequest asks to replay the events matching a filter.
type BulkRequest struct {
	// Filter selects events as in the listing (its Cursor and Limit are
	// set from the fields below).
	Filter dedupe.EventFilter
	// Destination is where to replay, as in ReplayRequest: empty or
	// AllDestinations means every one that needs it. The caller also
	// narrows Filter to the events of sources that have it.
	Destination string
	// Cursor continues after the previous call's last event
	// (BulkResult.Next).
	Cursor string
	// Limit caps the events this call acts on; it must be positive (the
	// caller bounds it).
	Limit int
	// DryRun only counts and lists what would be replayed.
	DryRun bool
	// Force, By and Reason are as in ReplayRequest.
	Force      bool
	By, Reason string
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

// BulkReplay is one event of a bulk replay.
type BulkReplay struct {
	Source    string      `json:"source"`
	EventID   string      `json:"event_id"`
	EventType string      `json:"event_type,omitempty"`
	State     string      `json:"state"`
	Runs      []RunReplay `json:"runs,omitempty"`
	Error     string      `json:"error,omitempty"`
}

// Bulk replays up to Limit events matching the filter, newest first, one
// after the other, each as Replay does; with DryRun it only counts and
// lists them. Continue with BulkResult.Next. An event whose replay fails
// is counted in Failed and the others go on. It returns ErrBadReplay for
// a forced replay that names no destination or reason (or a limit that
// is not positive), ErrUnknownSource for a filter's unknown source, and
// the listing's errors (dedupe.ErrBadCursor, dedupe.ErrTooSlow).
func (r *Replayer) Bulk(ctx context.Context, req BulkRequest) (BulkResult, error) {
	if err := checkForce(req.Force, req.Destination, req.Reason); err != nil {
		return BulkResult{}, err
	}
	if req.Limit <= 0 {
		return BulkResult{}, fmt.Errorf("%w: a bulk replay needs a positive limit", ErrBadReplay)
	}
	if req.Filter.Source != "" {
		if _, ok := r.routes.Load()[req.Filter.Source]; !ok {
			return BulkResult{}, ErrUnknownSource
		}
	}
	f := req.Filter
	f.Cursor, f.Limit = req.Cursor, req.Limit
	matched, err := r.store.CountEvents(ctx, f)
	if err != nil {
		return BulkResult{}, err
	}
	page, err := r.store.ListEvents(ctx, f)
	if err != nil {
		return BulkResult{}, err
	}
	out := BulkResult{DryRun: req.DryRun, Matched: matched.Matched, MatchedAtLeast: !matched.Complete, Limit: req.Limit,
		Selected: len(page.Events), Events: []BulkReplay{}, Next: page.Next}
	loggerFrom(ctx, r.log).InfoContext(ctx, "bulk replay", slog.Bool("dry_run", req.DryRun), slog.Bool("force", req.Force),
		filterAttr(f, req.Destination), slog.Int64("matched", matched.Matched),
		slog.Bool("matched_at_least", !matched.Complete),
		slog.Int("selected", len(page.Events)), slog.String("by", req.By), slog.String("reason", req.Reason))
	for _, ev := range page.Events {
		br := BulkReplay{Source: ev.Source, EventID: ev.ExternalID, EventType: ev.EventType, State: ev.State}
		if !req.DryRun {
			res, err := r.Replay(ctx, ReplayRequest{
				Source: ev.Source, EventID: ev.ExternalID, Destination: req.Destination, Force: req.Force, By: req.By, Reason: req.Reason,
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

// filterAttr is the "filter" group of a bulk replay's log line: the
// fields of f that select events, and where the replay goes.
func filterAttr(f dedupe.EventFilter, destination string) slog.Attr {
	var attrs []any
	for _, kv := range [][2]string{{"source", f.Source}, {"state", f.State}, {"q", f.IDPrefix}, {"type", f.Type},
		{"destination", destination}, {"status", f.Status}} {
		if kv[1] != "" {
			attrs = append(attrs, slog.String(kv[0], kv[1]))
		}
	}
	if !f.Since.IsZero() {
		attrs = append(attrs, slog.Time("since", f.Since))
	}
	if !f.Until.IsZero() {
		attrs = append(attrs, slog.Time("until", f.Until))
	}
	return slog.Group("filter", attrs...)
}
