package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/webhookd/webhookd/dedupe"
)

// TestIssueCause: what a delivery's result says about its destination's
// issues.
func TestIssueCause(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name         string
		givenResult  callResult
		expectSignal issueSignal
		expectCause  string
	}{
		{"2xx", callResult{called: true, outcome: dedupe.OutcomeDone, statusCode: 200}, signalSuccess, ""},
		{"500", callResult{called: true, outcome: dedupe.OutcomeRetry, statusCode: 500}, signalFailure, "500"},
		{"410 permanent", callResult{called: true, outcome: dedupe.OutcomePermanent, statusCode: 410}, signalFailure, "410"},
		{"timeout", callResult{called: true, outcome: dedupe.OutcomeRetry, err: "timeout after 1s: Post …"}, signalFailure, CauseTimeout},
		{"connection", callResult{called: true, outcome: dedupe.OutcomeRetry, err: "connection error: dial tcp …"}, signalFailure, CauseConnection},
		{"429 is a wait, not a failure", callResult{called: true, outcome: dedupe.OutcomeHold, statusCode: 429}, signalNone, ""},
		{"rule", callResult{outcome: dedupe.OutcomePermanent, cause: CauseRule}, signalFailure, CauseRule},
		{"circuit open", callResult{cause: CauseCircuitOpen}, signalFailure, CauseCircuitOpen},
		{"filtered", callResult{outcome: dedupe.OutcomeFiltered}, signalNone, ""},
		{"settled without a call", callResult{}, signalNone, ""},
	} {
		signal, cause := issueCause(c.givenResult)
		if signal != c.expectSignal || cause != c.expectCause {
			t.Errorf("%s: got (%d, %q), want (%d, %q)", c.name, signal, cause, c.expectSignal, c.expectCause)
		}
	}
}

// countingIssueStore counts the failures written, as if each opened or
// counted into one open issue; while fail is set it refuses them.
type countingIssueStore struct {
	mu         sync.Mutex
	failures   map[string]int // by cause
	statements map[string]int // by cause
	fail       bool
}

func (s *countingIssueStore) RecordIssueFailure(_ context.Context, f dedupe.IssueFailure) (dedupe.IssueRecorded, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return dedupe.IssueRecorded{}, errors.New("database down")
	}
	if f.Count != len(f.ExternalIDs) {
		return dedupe.IssueRecorded{}, fmt.Errorf("%d failures of %d events", f.Count, len(f.ExternalIDs))
	}
	s.failures[f.Cause] += f.Count
	s.statements[f.Cause]++
	return dedupe.IssueRecorded{}, nil
}

func (s *countingIssueStore) RecordIssueSuccess(context.Context, string, string, int) (dedupe.IssueSuccess, error) {
	return dedupe.IssueSuccess{Open: true}, nil
}

func (s *countingIssueStore) OpenIssueDestinations(context.Context) ([]dedupe.IssueDestination, error) {
	return nil, nil
}

// TestIssuesCountAHeldEventOnce: failures are gathered off the delivery
// path and written one statement per issue; the open circuit holds each
// event again and again, its issue counts the event once (from many
// goroutines at once), while every failed call counts; once the
// destination has no open issue, a hold counts again; failures the
// database refused are written by the next flush.
func TestIssuesCountAHeldEventOnce(t *testing.T) {
	t.Parallel()
	store := &countingIssueStore{failures: map[string]int{}, statements: map[string]int{}}
	issues := NewIssues(store, IssuesConfig{Logger: slog.New(slog.DiscardHandler)})
	log := slog.New(slog.DiscardHandler)
	payload := func(n int) DeliverPayload {
		return DeliverPayload{Source: "stripe", Destination: "crm", EventID: fmt.Sprintf("evt_%d", n)}
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for n := range 50 {
				issues.observe(t.Context(), log, payload(n), callResult{cause: CauseCircuitOpen})
				if g == 0 {
					issues.observe(t.Context(), log, payload(n), callResult{called: true, outcome: dedupe.OutcomeRetry, statusCode: 500})
				}
			}
		})
	}
	wg.Wait()
	if got := store.failures[CauseCircuitOpen] + store.failures["500"]; got != 0 {
		t.Fatalf("%d failures written before the flush, want them gathered", got)
	}
	issues.Flush(t.Context())
	if got, n := store.failures[CauseCircuitOpen], store.statements[CauseCircuitOpen]; got != 50 || n != 1 {
		t.Errorf("8 holds of each of 50 events wrote %d circuit-open failures in %d statements, want 50 in 1", got, n)
	}
	if got, n := store.failures["500"], store.statements["500"]; got != 50 || n != 1 {
		t.Errorf("50 failed calls wrote %d failures in %d statements, want 50 in 1", got, n)
	}
	issues.setOpen(dedupe.IssueDestination{Source: "stripe", Destination: "crm"}, false)
	issues.observe(t.Context(), log, payload(0), callResult{cause: CauseCircuitOpen})
	store.fail = true
	issues.Flush(t.Context())
	store.fail = false
	issues.Flush(t.Context())
	if got := store.failures[CauseCircuitOpen]; got != 51 {
		t.Errorf("a hold after the issue closed, written after a refused flush: %d circuit-open failures, want 51", got)
	}
}
