package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/hibiken/asynq"

	"github.com/webhookd/webhookd/dedupe"
)

// runStore is what the handler needs from dedupe.Store.
type runStore interface {
	Claim(ctx context.Context, req dedupe.ClaimRequest) (dedupe.Claim, error)
	Finish(ctx context.Context, key string, f dedupe.Finish) (dedupe.Finished, error)
	AdvanceVersion(ctx context.Context, source, destination, entity, version, key string, hold time.Duration) (dedupe.Version, error)
	ReleaseVersion(ctx context.Context, source, destination, entity, key string) error
}

// Routes maps a source name to its destinations by name.
type Routes map[string]map[string]Destination

// DestinationCounts returns how many destinations each source has (what
// dedupe's event state needs to tell queued from done).
func (r Routes) DestinationCounts() map[string]int {
	m := make(map[string]int, len(r))
	for source, dests := range r {
		m[source] = len(dests)
	}
	return m
}

// HandlerConfig configures the deliver handler.
type HandlerConfig struct {
	// Routes says where each source's events go.
	Routes Routes
	// Lease is how long a claimed run may stay running before the sweeper
	// presumes its worker dead. Defaults to 2m.
	Lease time.Duration
	// Backoff spaces retries of failed attempts.
	Backoff Backoff
	// DefaultHold is the wait after a 429 without Retry-After. Defaults to 5s.
	DefaultHold time.Duration
	// HTTPClient calls destinations. Defaults to a client with pooled
	// connections; each call is bounded by its destination's Timeout.
	HTTPClient *http.Client
	// Logger receives one line per decision. Defaults to slog.Default().
	Logger *slog.Logger
	// Metrics, when set, counts outcomes and destination latency.
	Metrics *Metrics
	// Now returns the time used for signing. Defaults to time.Now.
	Now func() time.Time
}

// WithDefaults returns a copy of c with zero fields set to their defaults.
func (c HandlerConfig) WithDefaults() HandlerConfig {
	if c.Lease <= 0 {
		c.Lease = 2 * time.Minute
	}
	c.Backoff = c.Backoff.WithDefaults()
	if c.DefaultHold <= 0 {
		c.DefaultHold = 5 * time.Second
	}
	if c.HTTPClient == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64
		c.HTTPClient = &http.Client{Transport: t}
	}
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
	store runStore
	cfg   HandlerConfig
}

// NewHandler returns a Handler that claims keys in store.
func NewHandler(store runStore, cfg HandlerConfig) *Handler {
	return &Handler{store: store, cfg: cfg.WithDefaults()}
}

// ProcessTask implements asynq.Handler.
func (h *Handler) ProcessTask(ctx context.Context, t *asynq.Task) error {
	p, err := decodePayload(t.Payload())
	if err != nil {
		loggerFrom(ctx, h.cfg.Logger).ErrorContext(ctx, "dropping malformed task", slog.String("error", err.Error()))
		return fmt.Errorf("%w: %w", err, asynq.SkipRetry)
	}
	return h.Deliver(ctx, p)
}

// Deliver claims p's key and, if this worker gets it, forwards the event.
// The returned error tells Asynq what to do next: nil when the key is
// settled, a *RetryError to come back later, or an error wrapping
// asynq.SkipRetry when only a replay can reopen the run.
func (h *Handler) Deliver(ctx context.Context, p DeliverPayload) error {
	log := loggerFrom(ctx, h.cfg.Logger)
	key := p.Key()
	dest, ok := h.cfg.Routes[p.Source][p.Destination]
	if !ok {
		log.ErrorContext(ctx, "no such destination in the configuration; dropping task")
		h.cfg.Metrics.outcome(p.Destination, "unrouted")
		return fmt.Errorf("destination %s/%s is not configured: %w", p.Source, p.Destination, asynq.SkipRetry)
	}
	dest = dest.WithDefaults()

	claim, err := h.store.Claim(ctx, dedupe.ClaimRequest{
		Key:         key,
		Source:      p.Source,
		ExternalID:  p.EventID,
		Destination: p.Destination,
		Generation:  p.generation(),
		MaxAttempts: dest.MaxAttempts,
		Lease:       h.cfg.Lease,
	})
	if errors.Is(err, dedupe.ErrNotFound) {
		log.ErrorContext(ctx, "event is no longer stored; run failed")
		return fmt.Errorf("event gone: %w", asynq.SkipRetry)
	}
	if err != nil {
		log.WarnContext(ctx, "claim failed; will retry", slog.String("error", err.Error()))
		return &RetryError{Delay: h.cfg.Backoff.Delay(1), Hold: true, Reason: "claim failed"}
	}
	log = log.With(slog.Int("attempt", claim.Call), slog.Int("attempts", claim.Attempts))

	switch claim.Outcome {
	case dedupe.AlreadyDone:
		log.InfoContext(ctx, "key already done; not calling the destination again")
		h.cfg.Metrics.outcome(p.Destination, "already_done")
		return nil
	case dedupe.RunningElsewhere:
		wait := time.Until(claim.RetryAt)
		wait = min(max(wait, time.Second), h.cfg.Lease)
		log.InfoContext(ctx, "key is held elsewhere; retrying later", durationMS("retry_in_ms", wait))
		h.cfg.Metrics.outcome(p.Destination, "running_elsewhere")
		return &RetryError{Delay: wait, Hold: true, Reason: "key held elsewhere"}
	case dedupe.Ended:
		log.InfoContext(ctx, "key already ended; only a replay reopens it", slog.String("status", claim.Status))
		h.cfg.Metrics.outcome(p.Destination, "already_"+claim.Status)
		return nil
	}

	ev := claim.Event
	if ev.OrderEntity != "" {
		v, err := h.store.AdvanceVersion(ctx, p.Source, p.Destination, ev.OrderEntity, ev.OrderVersion, key, h.cfg.Lease)
		if err != nil {
			return h.finishRetry(ctx, log, p, key, claim.Call, callResult{kind: outcomeRetry, err: "ordering check failed"}, dest)
		}
		if v.Outcome == dedupe.VersionBusy {
			// Another event of the entity is being forwarded: wait for
			// it, so the destination sees the two in order. Not an attempt.
			// Poll every second: the other call usually ends long before
			// its hold (a lease) would.
			wait := max(min(time.Until(v.BusyUntil), time.Second), 100*time.Millisecond)
			_, err := h.store.Finish(ctx, key, dedupe.Finish{Kind: dedupe.FinishHold, Call: claim.Call, HoldFor: wait, Lease: h.cfg.Lease})
			if err != nil && !errors.Is(err, dedupe.ErrClaimLost) {
				log.ErrorContext(ctx, "could not store the hold", slog.String("error", err.Error()))
			}
			log.InfoContext(ctx, "another event of the entity is in flight; waiting for it",
				slog.String("entity", ev.OrderEntity), slog.String("version", ev.OrderVersion), durationMS("retry_in_ms", wait))
			h.cfg.Metrics.outcome(p.Destination, "entity_busy")
			return &RetryError{Delay: wait, Hold: true, Reason: "entity busy"}
		}
		if v.Outcome == dedupe.VersionFresh {
			// Free the entity once this call's outcome is stored.
			defer func() {
				if err := h.store.ReleaseVersion(context.WithoutCancel(ctx), p.Source, p.Destination, ev.OrderEntity, key); err != nil {
					log.WarnContext(ctx, "could not release the entity; it frees when the lease passes", slog.String("error", err.Error()))
				}
			}()
		}
		if v.Outcome == dedupe.VersionStale {
			_, err := h.store.Finish(ctx, key, dedupe.Finish{Kind: dedupe.FinishStale, Call: claim.Call})
			if err != nil && !errors.Is(err, dedupe.ErrClaimLost) {
				return &RetryError{Delay: h.cfg.Backoff.Delay(1), Hold: true, Reason: "storing stale outcome failed"}
			}
			log.InfoContext(ctx, "newer version already forwarded; skipped as stale",
				slog.String("entity", ev.OrderEntity), slog.String("version", ev.OrderVersion), slog.String("newest", v.Newest))
			h.cfg.Metrics.outcome(p.Destination, dedupe.StatusSkippedStale)
			return nil
		}
	}

	res := callDestination(ctx, h.cfg.HTTPClient, callRequest{
		dest:        dest,
		key:         key,
		source:      p.Source,
		eventID:     p.EventID,
		call:        claim.Call,
		contentType: ev.ContentType,
		body:        ev.Payload,
		now:         h.cfg.Now(),
	})
	h.cfg.Metrics.destinationLatency(p.Destination, res.duration)
	log = log.With(slog.Int("status_code", res.statusCode), durationMS("duration_ms", res.duration))

	switch res.kind {
	case outcomeDone:
		_, err := h.store.Finish(ctx, key, dedupe.Finish{
			Kind: dedupe.FinishDone, Call: claim.Call, Called: true,
			StatusCode: res.statusCode, Result: res.result, Duration: res.duration,
		})
		if errors.Is(err, dedupe.ErrClaimLost) {
			log.WarnContext(ctx, "delivered, but the run was handed on meanwhile; the next call carries the same key")
			h.cfg.Metrics.outcome(p.Destination, "claim_lost")
			return nil
		}
		if err != nil {
			// The call succeeded but is not recorded: the lease will
			// pass and the retry carries the same key.
			log.ErrorContext(ctx, "delivered but could not store the result", slog.String("error", err.Error()))
			return &RetryError{Delay: h.cfg.Lease, Hold: true, Reason: "storing result failed"}
		}
		log.InfoContext(ctx, "delivered")
		h.cfg.Metrics.outcome(p.Destination, dedupe.StatusDone)
		return nil
	case outcomeHold:
		hold := res.holdFor
		if hold <= 0 {
			hold = h.cfg.DefaultHold
		}
		_, err := h.store.Finish(ctx, key, dedupe.Finish{
			Kind: dedupe.FinishHold, Call: claim.Call, Called: true, StatusCode: res.statusCode,
			Error: res.err, Duration: res.duration, HoldFor: hold, Lease: h.cfg.Lease,
		})
		if errors.Is(err, dedupe.ErrClaimLost) {
			log.WarnContext(ctx, "held, but the run was handed on meanwhile")
			return nil
		}
		if err != nil {
			log.ErrorContext(ctx, "could not store the hold", slog.String("error", err.Error()))
		}
		log.InfoContext(ctx, "destination asked to wait; holding the key", durationMS("retry_in_ms", hold))
		h.cfg.Metrics.outcome(p.Destination, "held")
		return &RetryError{Delay: hold, Hold: true, Reason: res.err}
	case outcomeRetry:
		return h.finishRetry(ctx, log, p, key, claim.Call, res, dest)
	default:
		_, err := h.store.Finish(ctx, key, dedupe.Finish{
			Kind: dedupe.FinishPermanent, Call: claim.Call, Called: true, StatusCode: res.statusCode,
			Error: res.err, Duration: res.duration,
		})
		if err != nil && !errors.Is(err, dedupe.ErrClaimLost) {
			log.ErrorContext(ctx, "could not store the permanent failure", slog.String("error", err.Error()))
			return &RetryError{Delay: h.cfg.Backoff.Delay(1), Hold: true, Reason: "storing failure failed"}
		}
		log.WarnContext(ctx, "destination refused the event; failed permanently", slog.String("error", res.err))
		h.cfg.Metrics.outcome(p.Destination, dedupe.StatusFailed)
		return fmt.Errorf("%s: %w", res.err, asynq.SkipRetry)
	}
}

func (h *Handler) finishRetry(ctx context.Context, log *slog.Logger, p DeliverPayload, key string, call int, res callResult, dest Destination) error {
	fin, err := h.store.Finish(ctx, key, dedupe.Finish{
		Kind: dedupe.FinishRetry, Call: call, Called: res.statusCode != 0 || res.duration > 0,
		StatusCode: res.statusCode, Error: res.err, Duration: res.duration,
	})
	if errors.Is(err, dedupe.ErrClaimLost) {
		log.WarnContext(ctx, "failed, and the run was handed on meanwhile", slog.String("error", res.err))
		return nil
	}
	if err != nil {
		log.ErrorContext(ctx, "could not store the failed attempt", slog.String("error", err.Error()))
		return &RetryError{Delay: h.cfg.Backoff.Delay(1), Reason: res.err}
	}
	log = log.With(slog.Int("attempts", fin.Attempts))
	if fin.Status == dedupe.StatusDead {
		log.ErrorContext(ctx, "attempts exhausted; run is dead", slog.String("error", res.err), slog.Int("max_attempts", dest.MaxAttempts))
		h.cfg.Metrics.outcome(p.Destination, dedupe.StatusDead)
		return fmt.Errorf("%s: %w", res.err, asynq.SkipRetry)
	}
	delay := h.cfg.Backoff.Delay(fin.Attempts)
	log.WarnContext(ctx, "attempt failed; retrying", slog.String("error", res.err), durationMS("retry_in_ms", delay))
	h.cfg.Metrics.outcome(p.Destination, "retry")
	return &RetryError{Delay: delay, Reason: res.err}
}

// durationMS logs a duration as fractional milliseconds.
func durationMS(key string, d time.Duration) slog.Attr {
	return slog.Float64(key, float64(d.Microseconds())/1000)
}
