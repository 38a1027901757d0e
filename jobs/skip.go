package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/webhookd/webhookd/dedupe"
)

// Skip actions, per destination, as reported in RunSkip.Action.
const (
	// ActionSkipped: the run, failed for good or dead, was recorded as
	// skipped; the entity's later events go on past it.
	ActionSkipped = "skipped"
	// ActionNotEnded: the run is not failed or dead (it may still be
	// delivered, or it was); nothing was done.
	ActionNotEnded = "not_ended"
	// ActionNoRun: the destination has no run of the event; nothing was
	// done.
	ActionNoRun = "no_run"
)

// SkipRequest asks to let an entity go on past one of its events, on
// a destination whose order holds the entity behind a failed or dead
// run (order mode fifo, on_failure hold).
type SkipRequest struct {
	Source  string
	EventID string
	// Destination names the destination whose run is skipped, or
	// AllDestinations for every one the event was planned for. Required.
	Destination string
	// By and Reason are recorded on the run and in the audit log line;
	// Reason is required. By defaults to "admin".
	By, Reason string
}

// SkipResult says what a skip did, per destination.
type SkipResult struct {
	Source  string `json:"source"`
	EventID string `json:"event_id"`
	// Skipped is true when at least one run was skipped.
	Skipped bool      `json:"skipped"`
	Runs    []RunSkip `json:"runs"`
}

// RunSkip is what a skip did for one destination.
type RunSkip struct {
	Destination string `json:"destination"`
	Key         string `json:"key,omitempty"`
	Generation  int    `json:"generation,omitempty"`
	// Action is one of ActionSkipped, ActionNotEnded, ActionNoRun.
	Action string `json:"action"`
	// Status is the run's stored status (it stays failed or dead).
	Status string `json:"status,omitempty"`
}

// Skip records an operator's skip of an event's latest run per named
// destination: a run failed for good or dead is marked skipped (who,
// when, why), and the entity's later events held behind it are woken, to
// be called in order now (a wake lost waits for their next poll); any
// other run is left alone. Like a forced replay it must name its
// destination and give a reason. It returns ErrBadReplay for a request
// without them, dedupe.ErrNotFound for an unknown event, ErrUnknownSource
// or ErrUnknownDestination, and dedupe.ErrTooSlow when the database did
// not answer in time.
func (r *Replayer) Skip(ctx context.Context, req SkipRequest) (SkipResult, error) {
	if req.By == "" {
		req.By = "admin"
	}
	res := SkipResult{Source: req.Source, EventID: req.EventID, Runs: []RunSkip{}}
	switch {
	case req.Destination == "":
		return res, fmt.Errorf("%w: a skip lets an entity's later events go out past this one: name destination=<name>, or destination=%s for all", ErrBadReplay, AllDestinations)
	case strings.TrimSpace(req.Reason) == "":
		return res, fmt.Errorf("%w: a skip needs a reason (recorded on the run)", ErrBadReplay)
	}
	dests, err := r.routes.Load().DestinationNames(req.Source)
	if err != nil {
		return res, err
	}
	ev, err := r.store.GetEvent(ctx, req.Source, req.EventID, dedupe.DestinationView{})
	if err != nil {
		return res, err
	}
	if req.Destination == AllDestinations {
		dests = r.plan(ev)
	} else {
		if !slices.Contains(dests, req.Destination) {
			return res, fmt.Errorf("%w: %s", ErrUnknownDestination, req.Destination)
		}
		dests = []string{req.Destination}
	}
	latest := latestRuns(ev.Runs)
	log := loggerFrom(ctx, r.log).With(slog.String("source", req.Source), slog.String("event_id", req.EventID),
		slog.String("by", req.By), slog.String("reason", req.Reason))
	for _, dest := range dests {
		run := latest[dest]
		if run == nil {
			res.Runs = append(res.Runs, RunSkip{Destination: dest, Action: ActionNoRun})
			continue
		}
		sr, skipped, err := r.store.SkipRun(ctx, run.Key, req.By, req.Reason)
		if err != nil {
			return res, err
		}
		rs := RunSkip{Destination: dest, Key: sr.Key, Generation: sr.Generation, Status: sr.Status, Action: ActionNotEnded}
		if skipped {
			rs.Action = ActionSkipped
			res.Skipped = true
			log.InfoContext(ctx, "run skipped: the entity's later events go on past it",
				slog.String("key", sr.Key), slog.String("destination", dest), slog.String("status", sr.Status))
			if ev.OrderEntity != "" {
				wakeHeldBehind(ctx, log, r.store, r.queue, req.Source, dest, ev.OrderEntity, req.EventID)
			}
		} else {
			log.InfoContext(ctx, "skip asked for a run that is not failed or dead; nothing done",
				slog.String("key", sr.Key), slog.String("destination", dest), slog.String("status", sr.Status))
		}
		res.Runs = append(res.Runs, rs)
	}
	return res, nil
}
