package jobs

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/tracing"
)

// reconcileStore is what the reconciler needs from dedupe.Store.
type reconcileStore interface {
	WithRecoveryLock(ctx context.Context, hold time.Duration, pass func(context.Context) error) error
	SweepExpired(ctx context.Context, limit int) ([]dedupe.UnsettledRun, error)
	DueRuns(ctx context.Context, after dedupe.RunCursor, slack time.Duration, limit int) ([]dedupe.UnsettledRun, dedupe.RunCursor, error)
	OutboxPage(ctx context.Context, after dedupe.OutboxCursor, minAge time.Duration, limit int) ([]dedupe.OutboxEntry, dedupe.OutboxCursor, error)
	UnsettledEvents(ctx context.Context, entries []dedupe.OutboxEntry) ([]dedupe.UnsettledEvent, error)
	SettleEvents(ctx context.Context, refs []dedupe.EventRef) error
	SetPlans(ctx context.Context, refs []dedupe.EventRef) error
	PendingCount(ctx context.Context, sources []string) (int64, error)
	OrderWaits(ctx context.Context) ([]dedupe.OrderWait, error)
}

// ReconcilerConfig configures the Reconciler.
type ReconcilerConfig struct {
	// Interval is the time between passes. Defaults to 2s; keep it at
	// most Lease/2, so a run whose worker died is taken back within
	// Lease + Lease/2.
	Interval time.Duration
	// Lease is the runs' lease (HandlerConfig.Lease). A task held as
	// active while Postgres says its run was due and unclaimed for
	// Orphaned is presumed held by a dead worker. Defaults to dedupe.DefaultLease.
	Lease time.Duration
	// Orphaned is how long a due, unclaimed run's task may stay active
	// before it is put back on the queue: a live worker claims a task
	// within milliseconds of taking it. Defaults to Lease/2, at most 10s.
	Orphaned time.Duration
	// MinAge leaves events recorded more recently than this to the relay's
	// fast path. Defaults to 2s.
	MinAge time.Duration
	// Slack is how long past its due time a try may go unclaimed before
	// its task is checked: a healthy queue claims it within a second.
	// Defaults to 2s.
	Slack time.Duration
	// Recheck is how often the walk through the outbox starts again at
	// the oldest event once it has caught up. In between, each pass reads
	// only the events that came of age since: an event still queued
	// after the walk passed it (a backlog) is read again only every
	// Recheck, not every pass, and a task Redis lost is written again at
	// the first pass Recheck after the last start. Defaults to
	// 4 × Interval, at most 8s: with the default Interval, within 10s of
	// Redis answering again.
	Recheck time.Duration
	// BatchSize caps the rows one statement reads and the tasks one
	// script checks. Defaults to 500.
	BatchSize int
	// Budget bounds the work of one pass: a longer list of unsettled runs
	// or events (a deep backlog) is walked over several passes, each
	// resuming where the last stopped, so recovery never takes more than
	// a share of Postgres and Redis from the work itself. Defaults to
	// Interval/4.
	Budget time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Metrics, when set, counts passes, sweeper resets and task actions,
	// and exports the outbox backlog.
	Metrics *Metrics
	// Now returns the current time. Defaults to time.Now.
	Now func() time.Time
	// TracerProvider, when set, puts each recovery decision about a run
	// or task in its event's trace (tracing.go); nil turns tracing off.
	TracerProvider trace.TracerProvider
}

// WithDefaults returns a copy of c with zero fields set to their defaults.
func (c ReconcilerConfig) WithDefaults() ReconcilerConfig {
	if c.Interval <= 0 {
		c.Interval = 2 * time.Second
	}
	if c.Lease <= 0 {
		c.Lease = dedupe.DefaultLease
	}
	if c.Orphaned <= 0 {
		c.Orphaned = min(c.Lease/2, 10*time.Second)
	}
	if c.MinAge <= 0 {
		c.MinAge = 2 * time.Second
	}
	if c.Slack <= 0 {
		c.Slack = 2 * time.Second
	}
	if c.Recheck <= 0 {
		c.Recheck = min(4*c.Interval, 8*time.Second)
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 500
	}
	if c.Budget <= 0 {
		c.Budget = c.Interval / 4
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Reconciler is the one place that recovers lost work, driven by what
// Postgres records and nothing kept only in Redis. Each pass (one process
// at a time, under an advisory lock) it
//
//  1. takes back runs whose lease passed (their worker died or outlived
//     it): failed with attempts + 1, or dead (dedupe's sweep);
//  2. makes sure every run whose next try is due (a retry, the end of a
//     hold, a replay, a swept run) still has a live task;
//  3. makes sure every event in the outbox has a live task for each
//     destination without a run, and takes the events whose destinations
//     all have runs out of the outbox.
//
// "A live task" is decided by ensureScript from what Redis holds: a
// missing task is written again, one held as active by a worker Postgres
// says is gone is put back on the queue, an archived one is made pending
// again; one waiting for its time is left to wait. The claim in job_runs keeps any extra copy from
// calling the destination twice. Every step is safe to stop anywhere: a
// process killed mid-pass leaves nothing the next pass (on any process)
// does not find again.
type Reconciler struct {
	store    reconcileStore
	enqueuer *Enqueuer
	cfg      ReconcilerConfig

	// Where the walks through due runs and the outbox resume.
	dueCursor    dedupe.RunCursor
	outboxCursor dedupe.OutboxCursor
	// outboxStarted is when the outbox walk last started at the oldest
	// event; outboxCaughtUp is true once it reached the newest.
	outboxStarted  time.Time
	outboxCaughtUp bool
	// unroutedLogged is when events of unconfigured sources were last
	// reported.
	unroutedLogged time.Time
	// backlogDue is when the backlog gauge is counted next (countBacklog).
	backlogDue time.Time
	tracer     trace.Tracer // nil when tracing is off
}

// backlogCountShare bounds what counting the backlog costs: after a count
// that took d, the next waits backlogCountShare × d. The count reads
// every outbox row, so on a backlog of millions (a destination down for
// hours) counting it every pass on every process would cost Postgres
// more than delivering; this way it costs at most 1/50 of the time it
// takes, and the gauge stays as fresh as every pass while the outbox is
// small.
const backlogCountShare = 50

// countBacklog sets the backlog gauge when it is due.
func (r *Reconciler) countBacklog(ctx context.Context) {
	start := time.Now()
	if start.Before(r.backlogDue) {
		return
	}
	n, err := r.store.PendingCount(ctx, slices.Collect(maps.Keys(r.enqueuer.routes.Load())))
	r.backlogDue = start.Add(backlogCountShare * time.Since(start))
	if err == nil {
		r.cfg.Metrics.backlog(n)
	}
}

// NewReconciler returns a Reconciler that writes tasks through enqueuer;
// call Run to start it.
func NewReconciler(store reconcileStore, enqueuer *Enqueuer, cfg ReconcilerConfig) *Reconciler {
	cfg = cfg.WithDefaults()
	cfg.Metrics.registerTaskActions()
	return &Reconciler{store: store, enqueuer: enqueuer, cfg: cfg, tracer: tracing.Tracer(cfg.TracerProvider)}
}

// Run runs a pass every Interval until ctx ends.
func (r *Reconciler) Run(ctx context.Context) {
	ticker := time.NewTicker(r.cfg.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		if _, err := r.Pass(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Logger.WarnContext(ctx, "recovery pass failed; the next pass tries again", slog.String("error", err.Error()))
		}
		r.countBacklog(ctx)
		r.countOrderWaits(ctx)
	}
}

// countOrderWaits sets the gauges of runs held behind an earlier event of
// their entity. Only fifo order holds runs so, and the count reads every
// running run (dead index entries of finished ones included until vacuum
// passes), so with no fifo destination configured it is not asked.
func (r *Reconciler) countOrderWaits(ctx context.Context) {
	routes := r.enqueuer.routes.Load()
	if !routes.anyFIFO() {
		r.cfg.Metrics.orderWaits(routes, nil)
		return
	}
	if waits, err := r.store.OrderWaits(ctx); err == nil {
		r.cfg.Metrics.orderWaits(routes, waits)
	}
}

// PassReport counts what one pass did.
type PassReport struct {
	// Ran is false when another process was running a pass.
	Ran bool
	// Swept counts runs whose lease had passed.
	Swept int
	// Checked counts tasks checked in Redis.
	Checked int
	// Actions counts, per action, the tasks that were written, rescued,
	// hastened or revived.
	Actions map[string]int
	// Settled counts events taken out of the outbox.
	Settled int
}

// Pass runs one pass. It returns an error when Postgres or Redis failed
// mid-pass; what it did before stays done.
func (r *Reconciler) Pass(ctx context.Context) (PassReport, error) {
	rep := PassReport{Actions: map[string]int{}}
	hold := 2*r.cfg.Budget + 30*time.Second
	err := r.store.WithRecoveryLock(ctx, hold, func(ctx context.Context) error {
		rep.Ran = true
		deadline := r.cfg.Now().Add(r.cfg.Budget)
		if err := r.sweep(ctx, &rep); err != nil {
			return err
		}
		if err := r.dueRuns(ctx, &rep, deadline); err != nil {
			return err
		}
		return r.outbox(ctx, &rep, deadline)
	})
	switch {
	case errors.Is(err, dedupe.ErrRecoveryBusy):
		r.cfg.Metrics.recoveryPass("skipped")
		return rep, nil
	case err != nil:
		r.cfg.Metrics.recoveryPass("error")
		return rep, err
	}
	r.cfg.Metrics.recoveryPass("success")
	if rep.Swept > 0 || rep.Settled > 0 || len(rep.Actions) > 0 {
		r.cfg.Logger.DebugContext(ctx, "recovery pass", slog.Int("swept", rep.Swept), slog.Int("checked", rep.Checked),
			slog.Any("actions", rep.Actions), slog.Int("settled", rep.Settled))
	}
	return rep, nil
}

// sweep takes back every run whose lease passed and makes sure the
// failed ones have a live task: their worker is gone, so a task it still
// holds as active is put back on the queue now.
func (r *Reconciler) sweep(ctx context.Context, rep *PassReport) error {
	for {
		swept, err := r.store.SweepExpired(ctx, r.cfg.BatchSize)
		if err != nil {
			return err
		}
		rep.Swept += len(swept)
		var retry []pendingTask
		for _, run := range swept {
			r.cfg.Metrics.swept(run.Status)
			log := runLogger(r.cfg.Logger, run)
			if run.Status == dedupe.StatusDead {
				log.ErrorContext(ctx, "run's lease passed and attempts are exhausted; run is dead")
				r.traceRecovery(r.runTask(run, true), "lease passed", "dead")
				continue
			}
			log.WarnContext(ctx, "run's lease passed: its worker stopped without finishing, or it waited held longer than its lease; retrying with the same key")
			r.traceRecovery(r.runTask(run, true), "lease passed", "failed")
			retry = append(retry, r.runTask(run, true))
		}
		if err := r.ensure(ctx, rep, retry, "lease passed"); err != nil {
			return err
		}
		if len(swept) < r.cfg.BatchSize {
			return nil
		}
	}
}

// dueRuns makes sure every run whose next try is due has a live task,
// walking from where the last pass stopped until the list ends (then the
// next pass starts over) or the pass's budget is spent.
func (r *Reconciler) dueRuns(ctx context.Context, rep *PassReport, deadline time.Time) error {
	for {
		runs, next, err := r.store.DueRuns(ctx, r.dueCursor, r.cfg.Slack, r.cfg.BatchSize)
		if err != nil {
			return err
		}
		orphanedBefore := r.cfg.Now().Add(-r.cfg.Orphaned)
		tasks := make([]pendingTask, 0, len(runs))
		for _, run := range runs {
			tasks = append(tasks, r.runTask(run, run.Due.Before(orphanedBefore)))
		}
		if err := r.ensure(ctx, rep, tasks, "retry due"); err != nil {
			return err
		}
		if len(runs) < r.cfg.BatchSize {
			r.dueCursor = dedupe.RunCursor{} // the end: the next pass starts over
			return nil
		}
		r.dueCursor = next
		if r.cfg.Now().After(deadline) {
			return nil
		}
	}
}

// outbox makes sure every event in the outbox has a live task for each
// destination without a run, and settles the events whose destinations
// all have runs, walking as dueRuns does, except that a walk that caught
// up waits at the newest event, reading only those that come of age,
// until Recheck after its start.
func (r *Reconciler) outbox(ctx context.Context, rep *PassReport, deadline time.Time) error {
	if now := r.cfg.Now(); r.outboxCaughtUp && now.Sub(r.outboxStarted) >= r.cfg.Recheck {
		r.outboxCursor, r.outboxCaughtUp = dedupe.OutboxCursor{}, false
	}
	if r.outboxCursor == (dedupe.OutboxCursor{}) {
		r.outboxStarted = r.cfg.Now()
	}
	unrouted := 0
	defer func() {
		// Once a minute at most: such events stay until retention.
		if unrouted > 0 && r.cfg.Now().Sub(r.unroutedLogged) > time.Minute {
			r.unroutedLogged = r.cfg.Now()
			r.cfg.Logger.WarnContext(ctx, "events of sources that are not configured stay in the outbox until retention deletes them",
				slog.Int("events", unrouted))
		}
	}()
	for {
		entries, next, err := r.store.OutboxPage(ctx, r.outboxCursor, r.cfg.MinAge, r.cfg.BatchSize)
		if err != nil {
			return err
		}
		orphanedBefore := r.cfg.Now().Add(-r.cfg.Orphaned)
		routes := r.enqueuer.routes.Load()
		unsure, skipped, err := r.unsure(ctx, rep, routes, entries, orphanedBefore)
		if err != nil {
			return err
		}
		unrouted += skipped
		events, err := r.store.UnsettledEvents(ctx, unsure)
		if err != nil {
			return err
		}
		var (
			settled, planned []dedupe.EventRef
			tasks            []pendingTask
		)
		for _, ev := range events {
			dests := routes[ev.Source]
			if ev.Plan == nil {
				// Recorded before plans were kept: planned now, once.
				ev.Plan = routes.Plan(ev.Source, ev.EventType)
				planned = append(planned, ev.EventRef)
			}
			missing := 0
			for _, name := range ev.Plan {
				if _, configured := dests[name]; !configured || slices.Contains(ev.Claimed, name) {
					// A destination removed since the event was planned
					// gets nothing more; its runs stay visible.
					continue
				}
				missing++
				tasks = append(tasks, pendingTask{
					payload:     DeliverPayload{Source: ev.Source, EventID: ev.ExternalID, Destination: name},
					rescue:      ev.ReceivedAt.Before(orphanedBefore),
					traceParent: ev.TraceParent,
					handOff:     !ev.HandedOff,
				})
			}
			if missing == 0 {
				settled = append(settled, ev.EventRef)
			}
		}
		if err := r.store.SetPlans(ctx, planned); err != nil {
			return err
		}
		if err := r.ensure(ctx, rep, tasks, "event not claimed"); err != nil {
			return err
		}
		if err := r.store.SettleEvents(ctx, settled); err != nil {
			return err
		}
		rep.Settled += len(settled)
		if len(entries) < r.cfg.BatchSize {
			// Caught up: the next pass goes on from the newest event read.
			if len(entries) > 0 {
				r.outboxCursor = next
			}
			r.outboxCaughtUp = true
			return nil
		}
		r.outboxCursor = next
		if r.cfg.Now().After(deadline) {
			return nil
		}
	}
}

// unsure returns the outbox entries the walk must look at closely: those
// whose tasks Redis does not all hold as expected. An entry's tasks are
// those of every destination its source has now (its event's plan, not
// read yet, is at most those). When Redis holds each of them pending,
// waiting for its time, or active while a live worker may hold it (the
// event is younger than Orphaned), nothing would be written, rescued or
// settled for the entry, so its event and runs are not read: under a
// backlog that is almost every entry, each time the walk starts again.
// Any other entry (a task missing, archived or completed, or held past
// Orphaned; a destination the event is not planned for, whose task never
// exists) is looked at as before: its runs and plan decide. Entries of
// sources not configured are left out and counted (skipped).
func (r *Reconciler) unsure(ctx context.Context, rep *PassReport, routes Routes, entries []dedupe.OutboxEntry, orphanedBefore time.Time) (unsure []dedupe.OutboxEntry, skipped int, err error) {
	var ids []string
	for _, e := range entries {
		for name := range routes[e.Source] {
			ids = append(ids, Key(e.Source, name, e.ExternalID, 1))
		}
	}
	states, err := r.enqueuer.taskStates(ctx, ids)
	if err != nil {
		return nil, 0, err
	}
	i := 0
	for _, e := range entries {
		dests, ok := routes[e.Source]
		if !ok {
			skipped++
			continue
		}
		found := make([]taskAction, 0, len(dests))
		for range dests {
			if a := quietState(states[i], e.ReceivedAt.Before(orphanedBefore)); a != "" {
				found = append(found, a)
			}
			i++
		}
		if len(found) < len(dests) {
			unsure = append(unsure, e)
			continue
		}
		for _, a := range found {
			rep.Checked++
			r.cfg.Metrics.taskAction(string(a))
		}
	}
	return unsure, skipped, nil
}

// quietState is what ensureScript would report, changing nothing, for a
// task in Asynq state (as taskStates reads it), or "" when it would act
// or cannot tell without Postgres. orphaned says an active task may be
// held by a dead worker.
func quietState(state string, orphaned bool) taskAction {
	switch state {
	case "pending", "aggregating":
		return taskPending
	case "retry", "scheduled":
		return taskWaiting
	case "active":
		if !orphaned {
			return taskActive
		}
	}
	return ""
}

// pendingTask is a task recovery makes sure is live: rescue when no
// live worker can hold it. attempts is for its log line.
type pendingTask struct {
	payload  DeliverPayload
	attempts int
	rescue   bool
	// traceParent is the event's, for the span of what recovery did.
	traceParent string
	// handOff is true for an event the relay never enqueued (an import,
	// Redis down at ingest, a full fast path): writing its task is the
	// hand-off, routine, not a task Redis lost.
	handOff bool
}

// runTask is the task of run.
func (r *Reconciler) runTask(run dedupe.UnsettledRun, rescue bool) pendingTask {
	return pendingTask{
		payload:  DeliverPayload{Source: run.Source, EventID: run.ExternalID, Destination: run.Destination, Generation: run.Generation},
		attempts: run.Attempts, rescue: rescue, traceParent: run.TraceParent,
	}
}

// waiting is the takeAfter of every task recovery checks: a task waiting
// for its time is left to wait. It waits on purpose (a backoff, a
// destination's hold, a steering hold that Postgres does not record), so
// making it pending early would only send it back to wait; a replay makes
// its own task pending now.
var waiting = time.Unix(1<<50, 0)

// ensure makes sure each task is live and logs one line per task whose
// state it had to change. Tasks whose destination is not configured (a
// configuration that dropped it, or a process whose configuration lags
// another's) are left alone.
func (r *Reconciler) ensure(ctx context.Context, rep *PassReport, tasks []pendingTask, why string) error {
	reqs := make([]ensureRequest, 0, len(tasks))
	kept := make([]pendingTask, 0, len(tasks))
	for _, t := range tasks {
		dest, ok := r.enqueuer.routes.Load()[t.payload.Source][t.payload.Destination]
		if !ok {
			r.cfg.Metrics.taskAction("unrouted")
			continue
		}
		task, err := r.enqueuer.newDeliverTask(t.payload, dest)
		if err != nil {
			return err
		}
		reqs = append(reqs, ensureRequest{task: task, rescue: t.rescue, takeAfter: waiting})
		kept = append(kept, t)
	}
	if len(reqs) == 0 {
		return nil
	}
	actions, err := r.enqueuer.ensureTasks(ctx, reqs)
	for i, a := range actions {
		if a == "" {
			continue // not checked: the script call failed
		}
		rep.Checked++
		t := kept[i]
		if a == taskWritten && t.handOff {
			a = taskHandedOff
		}
		r.cfg.Metrics.taskAction(string(a))
		msg, level := taskActionMessage(a)
		if msg == "" {
			continue
		}
		rep.Actions[string(a)]++
		r.traceRecovery(t, why, string(a))
		r.cfg.Logger.Log(ctx, level, msg,
			slog.String("source", t.payload.Source), slog.String("event_id", t.payload.EventID),
			slog.String("key", t.payload.Key()), slog.String("destination", t.payload.Destination),
			slog.Int("attempts", t.attempts), slog.String("why", why))
	}
	return err
}

// taskActionMessage is the log line of a task recovery changed, or ""
// for one it left as it was.
func taskActionMessage(a taskAction) (string, slog.Level) {
	switch a {
	case taskWritten:
		return "task missing from the queue (Redis lost it); written again", slog.LevelWarn
	case taskHandedOff:
		return "event handed to the queue by recovery (the relay had not enqueued it)", slog.LevelInfo
	case taskRescued:
		return "task held by a worker that is gone; put back on the queue", slog.LevelWarn
	case taskHastened:
		return "task scheduled later than its run is due; made pending now", slog.LevelInfo
	case taskRevived:
		return "archived task made pending again for its run's due try", slog.LevelInfo
	}
	return "", slog.LevelDebug
}

func runLogger(log *slog.Logger, run dedupe.UnsettledRun) *slog.Logger {
	return log.With(slog.String("source", run.Source), slog.String("event_id", run.ExternalID),
		slog.String("key", run.Key), slog.String("destination", run.Destination), slog.Int("attempts", run.Attempts))
}
