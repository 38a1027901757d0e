package jobs

import (
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
