package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/hibiken/asynq"
	"go.opentelemetry.io/otel/trace"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/tracing"
)

// runStore is what the handler needs from dedupe.Store.
type runStore interface {
	Claim(ctx context.Context, req dedupe.ClaimRequest) (dedupe.Claim, error)
	Finish(ctx context.Context, key string, f dedupe.Finish) (dedupe.Finished, error)
	AdvanceVersion(ctx context.Context, r dedupe.VersionRequest) (dedupe.Version, error)
	ReleaseVersion(ctx context.Context, r dedupe.VersionRequest) error
	Head(ctx context.Context, r dedupe.HeadRequest) (dedupe.Head, error)
	EventContent(ctx context.Context, source, externalID string) (headers, payload []byte, err error)
	holdReleaser
}

// holdReleaser ends the holds of an entity's runs waiting behind one of
// its events (fifo); *dedupe.Store satisfies it.
type holdReleaser interface {
	ReleaseBehind(ctx context.Context, source, destination, entity, externalID string) ([]string, error)
}

// taskWaker makes waiting tasks run now; *Enqueuer satisfies it.
type taskWaker interface {
	WakeKeys(ctx context.Context, keys []string) (int, error)
}

// HandlerConfig configures the deliver handler.
type HandlerConfig struct {
	// Routes says where each source's events go.
	Routes RouteSource
	// Lease is how long a claimed run may stay running before recovery
	// presumes its worker dead. Defaults to dedupe.DefaultLease.
	Lease time.Duration
	// Backoff spaces retries of failed attempts.
	Backoff Backoff
	// DefaultHold is the wait after a 429 without Retry-After. Defaults to 5s.
	DefaultHold time.Duration
	// HTTPClient calls destinations. Defaults to a client with pooled
	// connections; each call is bounded by its destination's Timeout. It
	// never follows a redirect, whatever its CheckRedirect says: a 3xx is
	// a failed attempt.
	HTTPClient *http.Client
	// Logger receives one line per decision. Defaults to slog.Default().
	Logger *slog.Logger
	// Metrics, when set, counts outcomes and destination latency.
	Metrics *Metrics
	// Now returns the time used for signing. Defaults to time.Now.
	Now func() time.Time
	// Steering, when set, holds calls a destination must not get yet
	// (pause, circuit, concurrency, rate) before they claim their key.
	Steering *Steering
	// TracerProvider, when set, puts each claimed run's work in its
	// event's trace (tracing.go); nil turns tracing off.
	TracerProvider trace.TracerProvider
	// Issues, when set, counts each outcome toward its destination's
	// issues (issues.go).
	Issues *Issues
}

// WithDefaults returns a copy of c with zero fields set to their defaults.
func (c HandlerConfig) WithDefaults() HandlerConfig {
	if c.Lease <= 0 {
		c.Lease = dedupe.DefaultLease
	}
	c.Backoff = c.Backoff.WithDefaults()
	if c.DefaultHold <= 0 {
		c.DefaultHold = 5 * time.Second
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Transport: NewTransport(false)}
	}
	client := *c.HTTPClient
	client.CheckRedirect = noRedirects
	c.HTTPClient = &client
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Handler processes TypeDeliver tasks.
type Handler struct {
	store  runStore
	cfg    HandlerConfig
	tracer trace.Tracer // nil when tracing is off
	// fair remembers events' fair_by values (fairValue).
	fair fairCache
}

// NewHandler returns a Handler that claims keys in store.
func NewHandler(store runStore, cfg HandlerConfig) *Handler {
	return &Handler{store: store, cfg: cfg.WithDefaults(), tracer: tracing.Tracer(cfg.TracerProvider)}
}

// ProcessTask implements asynq.Handler.
func (h *Handler) ProcessTask(ctx context.Context, t *asynq.Task) error {
	if p, ok := ctx.Value(payloadKey{}).(DeliverPayload); ok {
		return h.Deliver(ctx, p)
	}
	p, err := decodePayload(t.Payload())
	if err != nil {
		loggerFrom(ctx, h.cfg.Logger).ErrorContext(ctx, "dropping malformed task", slog.String("error", err.Error()))
		return fmt.Errorf("%w: %w", err, asynq.SkipRetry)
	}
	return h.Deliver(ctx, p)
}

// Deliver claims p's key and, if this worker gets it, forwards the event:
// claim, ordering guard, call, settle. The returned error tells Asynq
// what to do next: nil when the key is settled, a *RetryError to come
// back later, or an error wrapping asynq.SkipRetry when only a replay can
// reopen the run. How it ended is counted once, here
// (webhookd_job_outcomes_total), and so is what it says about the
// destination's issues.
func (h *Handler) Deliver(ctx context.Context, p DeliverPayload) error {
	outcome, res, err := h.deliver(ctx, p)
	if outcome != "" {
		h.cfg.Metrics.outcome(p.Source, p.Destination, outcome)
	}
	h.cfg.Issues.observe(ctx, loggerFrom(ctx, h.cfg.Logger), p, res)
	return err
}

// deliver does Deliver's work and returns the outcome to count ("" when
// the task was held before its claim: steering counts that) and the
// call's result (empty when nothing was called).
func (h *Handler) deliver(ctx context.Context, p DeliverPayload) (string, callResult, error) {
	log := loggerFrom(ctx, h.cfg.Logger)
	dest, ok := h.cfg.Routes.Load()[p.Source][p.Destination]
	if !ok {
		log.ErrorContext(ctx, "no such destination in the configuration; dropping task")
		return "unrouted", callResult{}, fmt.Errorf("destination %s/%s is not configured: %w", p.Source, p.Destination, asynq.SkipRetry)
	}

	adm, err := h.admit(ctx, log, p, dest)
	if err != nil || adm.hold > 0 {
		if adm.reason == holdCircuitOpen {
			return "", callResult{cause: CauseCircuitOpen}, err
		}
		return "", callResult{}, err
	}
	claimStart := h.claimStarted()
	claim, outcome, settled, err := h.claim(ctx, log, p, dest)
	if settled {
		h.steered(ctx, log, p, dest, adm, callResult{})
		return outcome, callResult{}, err
	}
	ctx, span := h.startDeliver(ctx, p, claim, claimStart)
	defer span.End()
	log = log.With(slog.Int("attempt", claim.Call))
	var (
		release func()
		res     callResult
	)
	ok = false
	err = sleep(ctx, adm.turnIn)
	h.cfg.Steering.endWait(p.Source, p.Destination, adm)
	if err != nil {
		// Stopping before the call's turn under the rate came: it waits
		// for its next try, no attempt spent.
		res = callResult{outcome: dedupe.OutcomeHold, err: "stopped while waiting for its turn under the rate limit", holdReason: holdRate}
	} else {
		release, res, ok = h.guard(ctx, log, p, dest, claim)
	}
	var req callRequest
	if ok {
		req, res, ok = ruled(dest, callRequest{
			dest:        dest,
			key:         p.Key(),
			source:      p.Source,
			eventID:     p.EventID,
			eventType:   claim.Event.EventType,
			call:        claim.Call,
			contentType: claim.Event.ContentType,
			headers:     claim.Event.Headers,
			body:        claim.Event.Payload,
			entity:      claim.Event.OrderEntity,
			sequence:    res.sequence,
			now:         h.cfg.Now(),
		}, claim.Event)
	}
	if ok {
		callCtx, callSpan := h.startCall(ctx, dest, claim.Call)
		res = kindOf(dest).call(callCtx, h.cfg.HTTPClient, req)
		if req.transformed && res.called {
			res.sentBody = req.body[:min(len(req.body), resultBodyLimit)]
		}
		endCall(callSpan, res)
		h.cfg.Metrics.called(p.Source, p.Destination, res.statusCode, res.outcome == dedupe.OutcomeDone, res.duration)
	}
	outcome, err = h.settle(ctx, log, p, dest, claim, res)
	h.steered(ctx, log, p, dest, adm, res)
	if release != nil {
		release()
	}
	h.wakeSuccessors(ctx, log, p, dest, claim, res)
	return outcome, res, err
}

// wakeSuccessors wakes the events of the entity held behind p's (fifo)
// once its run has settled for good (done, stale, filtered, refused), so
// the next one is called now instead of at its next poll. Losing a wake
// costs only that poll's wait.
func (h *Handler) wakeSuccessors(ctx context.Context, log *slog.Logger, p DeliverPayload, dest Destination, claim dedupe.Claim, res callResult) {
	switch {
	case !dest.Order.FIFO, claim.Event.OrderEntity == "", h.cfg.Steering == nil:
		return
	case res.outcome == dedupe.OutcomeDone, res.outcome == dedupe.OutcomeStale, res.outcome == dedupe.OutcomeFiltered,
		res.outcome == dedupe.OutcomePermanent && !dest.Order.HoldOnFailure:
	default:
		return
	}
	wakeHeldBehind(ctx, log, h.store, h.cfg.Steering.enqueuer, p.Source, p.Destination, claim.Event.OrderEntity, p.EventID)
}

// wakeHeldBehind ends the holds of entity's events held on destination
// behind event externalID (fifo), settled or skipped, and wakes their
// tasks, so the next one is called now instead of at its next poll
// (fifoPoll), which is all a lost wake costs.
func wakeHeldBehind(ctx context.Context, log *slog.Logger, releaser holdReleaser, waker taskWaker,
	source, destination, entity, externalID string) {
	ctx = context.WithoutCancel(ctx)
	keys, err := releaser.ReleaseBehind(ctx, source, destination, entity, externalID)
	if err == nil && len(keys) > 0 {
		_, err = waker.WakeKeys(ctx, keys)
	}
	if err != nil {
		log.InfoContext(ctx, "could not wake the entity's next events; they ask again at their next poll",
			slog.String("destination", destination), slog.String("error", err.Error()))
	}
}

// claim claims p's key. When the key is not this worker's to call now
// (done, ended, held elsewhere, or the claim failed), settled is true,
// outcome is what to count ("" for none) and err is what Asynq is told.
func (h *Handler) claim(ctx context.Context, log *slog.Logger, p DeliverPayload, dest Destination) (claim dedupe.Claim, outcome string, settled bool, err error) {
	claim, err = h.store.Claim(ctx, dedupe.ClaimRequest{
		Key:         p.Key(),
		Source:      p.Source,
		ExternalID:  p.EventID,
		Destination: p.Destination,
		Generation:  p.generation(),
		MaxAttempts: dest.MaxAttempts,
		Lease:       h.cfg.Lease,
	})
	if errors.Is(err, dedupe.ErrNotFound) {
		log.ErrorContext(ctx, "event is no longer stored; run failed")
		return claim, "", true, fmt.Errorf("event gone: %w", asynq.SkipRetry)
	}
	if errors.Is(err, dedupe.ErrKeyConflict) {
		// Never call under a key that is another run's: the destination
		// would take this event for that one.
		log.ErrorContext(ctx, "the key's run belongs to another event; not calling the destination", slog.String("error", err.Error()))
		return claim, "key_conflict", true, fmt.Errorf("key conflict: %w", asynq.SkipRetry)
	}
	if err != nil {
		log.WarnContext(ctx, "claim failed; will retry", slog.String("error", err.Error()))
		return claim, "", true, &RetryError{Delay: h.cfg.Backoff.Delay(1), Hold: true, Reason: "claim failed"}
	}
	log = log.With(slog.Int("attempt", claim.Call), slog.Int("attempts", claim.Attempts))
	switch claim.Outcome {
	case dedupe.AlreadyDone:
		log.InfoContext(ctx, "key already done; not calling the destination again")
		return claim, "already_done", true, nil
	case dedupe.RunningElsewhere:
		wait := min(max(time.Until(claim.RetryAt), time.Second), h.cfg.Lease)
		log.InfoContext(ctx, "key is held elsewhere; retrying later", slog.Duration("retry_in", wait))
		return claim, "running_elsewhere", true, &RetryError{Delay: wait, Hold: true, Reason: "key held elsewhere"}
	case dedupe.Ended:
		log.InfoContext(ctx, "key already ended; only a replay reopens it", slog.String("status", claim.Status))
		return claim, "already_" + claim.Status, true, nil
	}
	return claim, "", false, nil
}

// guard applies the ordering guard to a claimed event whose source orders
// events: ok with a release func (free the entity once the outcome is
// stored) when the call may go, else the outcome to settle instead of a
// call: stale (a newer version was forwarded), a hold (another event of
// the entity is in flight, or, fifo, an earlier one is not settled), or
// a retry (the guard failed). An unordered event is always ok. In fifo
// mode res.sequence is the event's place in its entity.
func (h *Handler) guard(ctx context.Context, log *slog.Logger, p DeliverPayload, dest Destination, claim dedupe.Claim) (release func(), res callResult, ok bool) {
	ev := claim.Event
	if ev.OrderEntity == "" {
		return nil, callResult{}, true
	}
	if dest.Order.FIFO {
		head, err := h.store.Head(ctx, dedupe.HeadRequest{Source: p.Source, Destination: p.Destination, Entity: ev.OrderEntity,
			ExternalID: p.EventID, HoldOnFailure: dest.Order.HoldOnFailure, ReorderWindow: dest.Order.ReorderWindow,
			Key: p.Key(), Call: claim.Call})
		if err != nil {
			log.WarnContext(ctx, "ordering check failed", slog.String("error", err.Error()))
			return nil, callResult{outcome: dedupe.OutcomeRetry, err: "ordering check failed"}, false
		}
		if head.Behind != "" {
			// Not an attempt: woken when the head settles, else polled.
			return nil, callResult{outcome: dedupe.OutcomeHold, wait: fifoPoll, err: "an earlier event of the entity is not settled",
				label: "entity_order", holdReason: dedupe.OrderHoldPrefix + head.Behind}, false
		}
		if head.Wait > 0 {
			// The head waits out its reorder window: an earlier version
			// may still arrive. Not an attempt.
			return nil, callResult{outcome: dedupe.OutcomeHold, wait: head.Wait, err: "waiting for an earlier version that may still arrive",
				label: "reorder_window", holdReason: "order: reorder window"}, false
		}
		res.sequence = head.Sequence
		if ev.OrderVersion == "" {
			// No version: the order recorded is the order; nothing is
			// stale.
			return nil, res, true
		}
	}
	req := dedupe.VersionRequest{
		Source: p.Source, Destination: p.Destination, Entity: ev.OrderEntity, Version: ev.OrderVersion,
		Key: p.Key(), Call: claim.Call, Hold: h.cfg.Lease,
	}
	v, err := h.store.AdvanceVersion(ctx, req)
	if err != nil {
		log.WarnContext(ctx, "ordering check failed", slog.String("error", err.Error()))
		return nil, callResult{outcome: dedupe.OutcomeRetry, err: "ordering check failed"}, false
	}
	log = log.With(slog.String("entity", ev.OrderEntity), slog.String("version", ev.OrderVersion))
	switch v.Outcome {
	case dedupe.VersionBusy:
		// Poll every second: the other call usually ends long before its
		// hold (a lease) would. Not an attempt.
		wait := max(min(time.Until(v.BusyUntil), time.Second), 100*time.Millisecond)
		return nil, callResult{outcome: dedupe.OutcomeHold, wait: wait, err: "another event of the entity is in flight", label: "entity_busy",
			holdReason: "order"}, false
	case dedupe.VersionStale:
		log.InfoContext(ctx, "a newer version was already forwarded", slog.String("newest", v.Newest))
		return nil, callResult{outcome: dedupe.OutcomeStale}, false
	}
	return func() {
		if err := h.store.ReleaseVersion(context.WithoutCancel(ctx), req); err != nil {
			log.WarnContext(ctx, "could not release the entity; it frees when the lease passes", slog.String("error", err.Error()))
		}
	}, callResult{sequence: res.sequence}, true
}

// fifoPoll is how soon an event waiting behind an earlier one of its
// entity (fifo) asks again, if it is not woken first: the event it waits
// behind wakes it when it settles (wakeSuccessors).
const fifoPoll = 2 * time.Second
