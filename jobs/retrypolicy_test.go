package jobs_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/jobs"
)

// TestRetrySchedule: a destination's retry.schedule spaces its tries as
// listed, the last wait repeating until max_attempts, instead of the
// global backoff (10–40ms in these tests).
func TestRetrySchedule(t *testing.T) {
	t.Parallel()
	d := newDestination(t, status(http.StatusServiceUnavailable))
	schedule := []time.Duration{2 * time.Second, 3 * time.Second}
	b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: d.URL, MaxAttempts: 4,
		Retry: &jobs.RetrySpec{Schedule: schedule}}})
	q := b.startWorker(t)
	b.enqueue(t, q, "evt_1")
	pipelinetest.Eventually(t, 30*time.Second, "the run dead", func() bool { return b.status(t, "src:dst:evt_1") == dedupe.StatusDead })
	calls := d.Calls()
	if len(calls) != 4 {
		t.Fatalf("%d calls, want 4 (max_attempts)", len(calls))
	}
	// Asynq keeps a retry's time in whole seconds and looks for due
	// retries every second: a try comes within a second of its wait
	// (the global backoff would bring it within about one); a loaded
	// machine may be later still.
	for i, want := range []time.Duration{2 * time.Second, 3 * time.Second, 3 * time.Second} {
		gap := calls[i+1].At.Sub(calls[i].At)
		if gap < want-time.Second || gap > want+3*time.Second {
			t.Errorf("wait before try %d: %s, want %s (-1s…+3s)", i+2, gap.Round(time.Millisecond), want)
		}
	}
}

// TestRetryOn: with retry_on, a listed 4xx (409) is a failed attempt
// retried, and a status not listed (404) fails for good at once.
func TestRetryOn(t *testing.T) {
	t.Parallel()
	retry := &jobs.RetrySpec{RetryOn: []string{"408", "409", "425", "429", "5xx"}}
	t.Run("409 retries", func(t *testing.T) {
		t.Parallel()
		d := newDestination(t, func(n int, _ *http.Request, w http.ResponseWriter) {
			if n < 3 {
				w.WriteHeader(http.StatusConflict)
			}
		})
		b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: d.URL, MaxAttempts: 5, Retry: retry}})
		q := b.startWorker(t)
		b.enqueue(t, q, "evt_1")
		pipelinetest.Eventually(t, 15*time.Second, "the run done", func() bool { return b.status(t, "src:dst:evt_1") == dedupe.StatusDone })
		if r := b.run(t, "src:dst:evt_1"); r.Attempts != 2 || r.Calls != 3 || len(d.Calls()) != 3 {
			t.Errorf("run %+v, %d calls; want 2 failed attempts then done at the third call", r, len(d.Calls()))
		}
	})
	for _, code := range []int{http.StatusNotFound, http.StatusUnprocessableEntity} {
		t.Run(http.StatusText(code)+" fails for good", func(t *testing.T) {
			t.Parallel()
			d := newDestination(t, status(code))
			b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: d.URL, MaxAttempts: 5, Retry: retry}})
			q := b.startWorker(t)
			b.enqueue(t, q, "evt_1")
			pipelinetest.Eventually(t, 10*time.Second, "the run failed", func() bool { return b.status(t, "src:dst:evt_1") == dedupe.StatusFailed })
			time.Sleep(300 * time.Millisecond) // a retry, were there one, would come within the backoff
			r := b.run(t, "src:dst:evt_1")
			if !r.Permanent || len(d.Calls()) != 1 || r.LastError == nil || !strings.Contains(*r.LastError, "not in retry_on") {
				t.Errorf("run %+v, %d calls; want one call, failed for good, saying why", r, len(d.Calls()))
			}
		})
	}
	t.Run("a 5xx left out fails for good", func(t *testing.T) {
		t.Parallel()
		d := newDestination(t, status(http.StatusInternalServerError))
		b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: d.URL, MaxAttempts: 5, Retry: &jobs.RetrySpec{RetryOn: []string{"503"}}}})
		q := b.startWorker(t)
		b.enqueue(t, q, "evt_1")
		pipelinetest.Eventually(t, 10*time.Second, "the run failed", func() bool { return b.status(t, "src:dst:evt_1") == dedupe.StatusFailed })
		if n := len(d.Calls()); n != 1 {
			t.Errorf("%d calls, want 1", n)
		}
	})
}

// TestRetryConfigErrors: retry: is checked when the configuration is
// read.
func TestRetryConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spec jobs.DestinationSpec
		want string
	}{
		{jobs.DestinationSpec{Retry: &jobs.RetrySpec{Schedule: []time.Duration{time.Second, 0}}}, "retry.schedule[1]: must be a wait"},
		{jobs.DestinationSpec{Retry: &jobs.RetrySpec{RetryOn: []string{"200"}}}, `retry.retry_on[0]: "200" is not a status`},
		{jobs.DestinationSpec{Retry: &jobs.RetrySpec{RetryOn: []string{"6xx"}}}, `retry.retry_on[0]: "6xx" is not a status`},
		{jobs.DestinationSpec{Retry: &jobs.RetrySpec{RetryOn: []string{}}}, "retry.retry_on: must list at least one"},
		{jobs.DestinationSpec{URL: "nats://127.0.0.1:4222", Subject: "s", Retry: &jobs.RetrySpec{RetryOn: []string{"409"}}}, "retry.retry_on: applies only to an http(s) destination"},
	} {
		spec := tc.spec
		spec.Name = "d"
		if spec.URL == "" {
			spec.URL = "http://127.0.0.1:1/"
		}
		if _, err := jobs.NewDestination(spec, jobs.DestinationOptions{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.spec.Retry, err, tc.want)
		}
	}
}
