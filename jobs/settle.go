package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"

	"github.com/webhookd/webhookd/dedupe"
)

// transition is an outcome and the run status it led to (finishSQL in
// dedupe decides the status: a retry is dead once attempts run out).
type transition struct {
	outcome dedupe.Outcome
	status  string
}

// next says what Asynq is told after a settled call.
type next int

const (
	// nextNone: the key is settled; Asynq drops the task.
	nextNone next = iota
	// nextRetry: run the task again after the wait, a failed attempt.
	nextRetry
	// nextHold: run the task again after the wait, not a failed attempt.
	nextHold
	// nextStop: archive the task (asynq.SkipRetry); only a replay reopens
	// the run.
	nextStop
)

// settlement is what a transition does besides what finishSQL stores:
// what Asynq is told, the log line, and the outcome metric's label.
type settlement struct {
	next    next
	level   slog.Level
	message string
	metric  string
}

// settlements is the one table of what each outcome does (SPEC's
// outcome table, in the package doc). A transition not in it cannot
// happen: finishSQL maps each outcome to the statuses listed.
var settlements = map[transition]settlement{
	{dedupe.OutcomeDone, dedupe.StatusDone}:          {nextNone, slog.LevelInfo, "delivered", dedupe.StatusDone},
	{dedupe.OutcomeRetry, dedupe.StatusFailed}:       {nextRetry, slog.LevelWarn, "attempt failed; retrying with the same key", "retry"},
	{dedupe.OutcomeRetry, dedupe.StatusDead}:         {nextStop, slog.LevelError, "attempts exhausted; run is dead", dedupe.StatusDead},
	{dedupe.OutcomePermanent, dedupe.StatusFailed}:   {nextStop, slog.LevelWarn, "failed permanently; only a replay reopens the run", dedupe.StatusFailed},
	{dedupe.OutcomeHold, dedupe.StatusRunning}:       {nextHold, slog.LevelInfo, "holding the key; retrying later, not a failed attempt", "held"},
	{dedupe.OutcomeStale, dedupe.StatusSkippedStale}: {nextNone, slog.LevelInfo, "skipped as stale; the destination was not called", dedupe.StatusSkippedStale},
	{dedupe.OutcomeFiltered, dedupe.StatusFiltered}:  {nextNone, slog.LevelInfo, "the destination's when rule rejected the event; not called", dedupe.StatusFiltered},
}

// settle stores how the claimed call ended (dedupe.Store.Finish, which
// also completes the call's delivery_attempts row), logs the decision
// once, and returns the outcome to count and what Asynq is told; a
// failed attempt waits as dest's retry policy says.
func (h *Handler) settle(ctx context.Context, log *slog.Logger, p DeliverPayload, dest Destination, claim dedupe.Claim, res callResult) (string, error) {
	switch res.outcome {
	case dedupe.OutcomeRetry:
		res.wait = dest.Retry.delay(claim.Attempts+1, h.cfg.Backoff)
	case dedupe.OutcomeHold:
		if res.wait <= 0 {
			res.wait = h.cfg.DefaultHold
		}
	}
	if res.called {
		log = log.With(slog.Int("status_code", res.statusCode), slog.Duration("duration", res.duration))
	}
	if res.err != "" {
		log = log.With(slog.String("error", res.err))
	}
	if res.tokenRefetched {
		log = log.With(slog.Bool("oauth2_token_refetched", true))
	}
	fin, err := h.finish(ctx, log, p.Key(), dedupe.Finish{
		Outcome: res.outcome, Call: claim.Call, Called: res.called,
		StatusCode: res.statusCode, Result: res.result, Error: res.err, Duration: res.duration, Answer: res.answer,
		SentBody: res.sentBody,
		Wait:     res.wait, Lease: h.cfg.Lease, HoldReason: res.holdReason,
	})
	if errors.Is(err, dedupe.ErrClaimLost) {
		// The lease passed and the run was handed on: its new holder
		// decides. The call itself is logged with its outcome.
		log.WarnContext(ctx, "the run was handed on meanwhile; outcome logged, not stored on the run",
			slog.String("outcome", string(res.outcome)))
		return "claim_lost", nil
	}
	if err != nil {
		// Not stored: the run stays running until its lease passes, and
		// the retry carries the same key.
		log.ErrorContext(ctx, "could not store the outcome; the run is retried once its lease passes",
			slog.String("outcome", string(res.outcome)), slog.String("store_error", err.Error()))
		return "", &RetryError{Delay: h.cfg.Lease, Hold: true, Reason: "storing the outcome failed"}
	}
	s, ok := settlements[transition{res.outcome, fin.Status}]
	if !ok {
		return "", fmt.Errorf("outcome %s left the run %s, which no settlement covers: %w", res.outcome, fin.Status, asynq.SkipRetry)
	}
	metric, message := s.metric, s.message
	if res.label != "" {
		metric, message = res.label, message+": "+res.err
	}
	attrs := []slog.Attr{slog.Int("attempts", fin.Attempts)}
	if s.next == nextRetry || s.next == nextHold {
		attrs = append(attrs, slog.Duration("retry_in", res.wait))
	}
	log.LogAttrs(ctx, s.level, message, attrs...)
	switch s.next {
	case nextRetry:
		return metric, &RetryError{Delay: res.wait, Reason: res.err}
	case nextHold:
		return metric, &RetryError{Delay: res.wait, Hold: true, Reason: res.err}
	case nextStop:
		return metric, fmt.Errorf("%s: %w", cmp.Or(res.err, fin.Status), asynq.SkipRetry)
	}
	return metric, nil
}

// finish stores the outcome (dedupe.Store.Finish). While Postgres does
// not answer (a failover: the old primary is gone, the new one not yet
// promoted) it tries again, backing off from 100ms to 2s, until the
// task's time is up: an outcome not stored leaves the run running until
// its lease passes, and its retry would call the destination again with
// the same key. Storing late is safe: Finish is conditional on this
// claim, so once recovery has handed the run on it answers ErrClaimLost.
func (h *Handler) finish(ctx context.Context, log *slog.Logger, key string, f dedupe.Finish) (dedupe.Finished, error) {
	wait := 100 * time.Millisecond
	for tries := 1; ; tries++ {
		fin, err := h.store.Finish(ctx, key, f)
		if err == nil || errors.Is(err, dedupe.ErrClaimLost) {
			if tries > 1 {
				log.InfoContext(ctx, "outcome stored once Postgres answered again", slog.Int("tries", tries))
			}
			return fin, err
		}
		if tries == 1 {
			log.WarnContext(ctx, "could not store the outcome; trying again until Postgres answers",
				slog.String("outcome", string(f.Outcome)), slog.String("store_error", err.Error()))
		}
		select {
		case <-ctx.Done():
			return fin, err
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}
