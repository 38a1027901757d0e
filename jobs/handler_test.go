package jobs_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/jobs"
)

const body = `{"id":"evt_1","type":"invoice.paid"}`

// TestDeliverOutcomes drives one Deliver per row of SPEC's destination
// table against an httptest destination and checks what Asynq is told,
// the job_runs row, and what the destination saw.
func TestDeliverOutcomes(t *testing.T) {
	t.Parallel()
	type expectRetry struct {
		hold     bool
		min, max time.Duration
	}
	for _, tc := range []struct {
		name         string
		givenRespond func(int, *http.Request, http.ResponseWriter)
		givenTimeout time.Duration
		givenMax     int
		givenClosed  bool // the destination refuses connections
		expectNil    bool
		expectSkip   bool // error wraps asynq.SkipRetry
		expectRetry  *expectRetry
		expectStatus string
		expectCode   int // the stored result's status code, for done
		expectTries  int
		expectPerm   bool
	}{
		{name: "200Done", givenRespond: status(200), expectNil: true, expectStatus: dedupe.StatusDone, expectCode: 200},
		{name: "204Done", givenRespond: status(204), expectNil: true, expectStatus: dedupe.StatusDone, expectCode: 204},
		{name: "429RetryAfterHolds", givenRespond: func(_ int, _ *http.Request, w http.ResponseWriter) {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(429)
		}, expectRetry: &expectRetry{hold: true, min: 7 * time.Second, max: 7 * time.Second}, expectStatus: dedupe.StatusRunning},
		{name: "429WithoutRetryAfterHoldsDefault", givenRespond: status(429),
			expectRetry: &expectRetry{hold: true, min: 3 * time.Second, max: 3 * time.Second}, expectStatus: dedupe.StatusRunning},
		{name: "503RetryAfterHolds", givenRespond: func(_ int, _ *http.Request, w http.ResponseWriter) {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(503)
		}, expectRetry: &expectRetry{hold: true, min: 2 * time.Second, max: 2 * time.Second}, expectStatus: dedupe.StatusRunning},
		{name: "503Retries", givenRespond: status(503),
			expectRetry: &expectRetry{min: 5 * time.Millisecond, max: 10 * time.Millisecond}, expectStatus: dedupe.StatusFailed, expectTries: 1},
		{name: "500Retries", givenRespond: status(500),
			expectRetry: &expectRetry{min: 5 * time.Millisecond, max: 10 * time.Millisecond}, expectStatus: dedupe.StatusFailed, expectTries: 1},
		{name: "408Retries", givenRespond: status(408),
			expectRetry: &expectRetry{min: 5 * time.Millisecond, max: 10 * time.Millisecond}, expectStatus: dedupe.StatusFailed, expectTries: 1},
		{name: "TimeoutRetries", givenTimeout: 100 * time.Millisecond, givenRespond: func(_ int, r *http.Request, w http.ResponseWriter) {
			select {
			case <-r.Context().Done():
			case <-time.After(2 * time.Second):
			}
		}, expectRetry: &expectRetry{min: 5 * time.Millisecond, max: 10 * time.Millisecond}, expectStatus: dedupe.StatusFailed, expectTries: 1},
		{name: "ConnectionErrorRetries", givenClosed: true,
			expectRetry: &expectRetry{min: 5 * time.Millisecond, max: 10 * time.Millisecond}, expectStatus: dedupe.StatusFailed, expectTries: 1},
		{name: "400FailsPermanently", givenRespond: status(400), expectSkip: true, expectStatus: dedupe.StatusFailed, expectPerm: true, expectTries: 1},
		{name: "404FailsPermanently", givenRespond: status(404), expectSkip: true, expectStatus: dedupe.StatusFailed, expectPerm: true, expectTries: 1},
		{name: "422FailsPermanently", givenRespond: status(422), expectSkip: true, expectStatus: dedupe.StatusFailed, expectPerm: true, expectTries: 1},
		{name: "500AtMaxAttemptsIsDead", givenRespond: status(500), givenMax: 1, expectSkip: true, expectStatus: dedupe.StatusDead, expectTries: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := newDestination(t, tc.givenRespond)
			url := d.URL
			if tc.givenClosed {
				d.Close()
			}
			b := setup(t, handlerOptions{
				dest:        jobs.DestinationSpec{URL: url, Timeout: tc.givenTimeout, MaxAttempts: tc.givenMax},
				defaultHold: 3 * time.Second,
			})
			b.record(t, "evt_1", body)
			err := b.handler.Deliver(testCtx(t), jobs.DeliverPayload{Source: "src", EventID: "evt_1", Destination: "dst"})

			switch {
			case tc.expectNil:
				if err != nil {
					t.Fatalf("Deliver: %v, want nil", err)
				}
			case tc.expectSkip:
				if !errors.Is(err, asynq.SkipRetry) {
					t.Fatalf("Deliver: %v, want an error wrapping asynq.SkipRetry", err)
				}
			case tc.expectRetry != nil:
				var re *jobs.RetryError
				if !errors.As(err, &re) {
					t.Fatalf("Deliver: %v, want a *RetryError", err)
				}
				if re.Hold != tc.expectRetry.hold || re.Delay < tc.expectRetry.min || re.Delay > tc.expectRetry.max {
					t.Fatalf("retry %+v, want hold=%v and delay in [%s, %s]", re, tc.expectRetry.hold, tc.expectRetry.min, tc.expectRetry.max)
				}
				if errors.Is(err, asynq.SkipRetry) {
					t.Fatalf("a retry must not skip Asynq's retry")
				}
			}

			key := "src:dst:evt_1"
			r := b.run(t, key)
			if r.Status != tc.expectStatus || r.Attempts != tc.expectTries || r.Permanent != tc.expectPerm || r.Calls != 1 {
				t.Fatalf("run %+v, want status %s, %d attempts, permanent %v, 1 call", r, tc.expectStatus, tc.expectTries, tc.expectPerm)
			}
			if tc.expectRetry != nil && tc.expectRetry.hold && r.HeldUntil == nil {
				t.Fatalf("a hold left no held_until")
			}
			if tc.expectStatus == dedupe.StatusDone {
				var res struct {
					StatusCode int `json:"status_code"`
				}
				if err := json.Unmarshal([]byte(*r.Result), &res); err != nil || res.StatusCode != tc.expectCode {
					t.Fatalf("stored result %s (%v), want status code %d", *r.Result, err, tc.expectCode)
				}
			} else if r.LastError == nil || *r.LastError == "" {
				t.Fatalf("run %+v has no last error", r)
			}
			if tc.givenClosed {
				return
			}
			calls := d.Calls()
			if len(calls) != 1 {
				t.Fatalf("destination saw %d calls, want 1", len(calls))
			}
			c := calls[0]
			if c.Key != key || c.Attempt != "1" || c.Source != "src" || c.EventID != "evt_1" || c.Body != body || c.ContentType != "application/json" {
				t.Fatalf("destination saw %+v", c)
			}
			if n := b.schema.Int(t, `SELECT count(*) FROM delivery_attempts WHERE key = $1 AND call = 1`, key); n != 1 {
				t.Fatalf("%d logged calls, want 1", n)
			}
		})
	}
}

func TestDeliverRepeatAfterDoneCallsNothing(t *testing.T) {
	t.Parallel()
	d := newDestination(t, func(_ int, _ *http.Request, w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", "req_1")
		w.WriteHeader(201)
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
	b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: d.URL}})
	b.record(t, "evt_1", body)
	p := jobs.DeliverPayload{Source: "src", EventID: "evt_1", Destination: "dst"}
	for i := range 3 {
		if err := b.handler.Deliver(testCtx(t), p); err != nil {
			t.Fatalf("delivery %d: %v", i+1, err)
		}
	}
	if n := len(d.Calls()); n != 1 {
		t.Fatalf("destination called %d times, want 1", n)
	}
	var res struct {
		StatusCode int               `json:"status_code"`
		Headers    map[string]string `json:"headers"`
		Body       string            `json:"body"`
	}
	if err := json.Unmarshal([]byte(*b.run(t, p.Key()).Result), &res); err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 201 || res.Body != `{"ok":true}` || res.Headers["X-Request-Id"] != "req_1" {
		t.Fatalf("stored result %+v", res)
	}
}

func TestDeliverSignsWithStandardWebhooks(t *testing.T) {
	t.Parallel()
	d := newDestination(t, status(200))
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: d.URL, SigningSecret: secret}})
	b.record(t, "evt_1", body)
	if err := b.handler.Deliver(testCtx(t), jobs.DeliverPayload{Source: "src", EventID: "evt_1", Destination: "dst"}); err != nil {
		t.Fatal(err)
	}
	h := d.Calls()[0].Header
	if h.Get("webhook-id") != "src:dst:evt_1" {
		t.Fatalf("webhook-id %q, want the key", h.Get("webhook-id"))
	}
	// The reference library verifies what the destination received.
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify([]byte(d.Calls()[0].Body), h); err != nil {
		t.Fatalf("the Standard Webhooks reference library refuses the call: %v", err)
	}
	if err := wh.Verify([]byte(d.Calls()[0].Body+" "), h); err == nil {
		t.Fatal("the reference library accepts a changed body: the check proves nothing")
	}
}

// TestTwoCopiesAtOnce is the visibility-timeout case: Asynq hands the
// same task to a second worker while the first is still calling. The
// second is told to retry later and never calls the destination.
func TestTwoCopiesAtOnce(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	arrived := make(chan struct{}, 10)
	d := newDestination(t, func(_ int, _ *http.Request, w http.ResponseWriter) {
		arrived <- struct{}{}
		<-release
		w.WriteHeader(200)
	})
	b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: d.URL}})
	b.record(t, "evt_1", body)
	p := jobs.DeliverPayload{Source: "src", EventID: "evt_1", Destination: "dst"}

	first := make(chan error, 1)
	go func() { first <- b.handler.Deliver(testCtx(t), p) }()
	<-arrived

	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for range 10 {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- b.handler.Deliver(testCtx(t), p) }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		var re *jobs.RetryError
		if !errors.As(err, &re) || !re.Hold || re.Delay < time.Second {
			t.Fatalf("second copy: %v, want a hold (retry later, not a failure)", err)
		}
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("first copy: %v", err)
	}
	if n := len(d.Calls()); n != 1 {
		t.Fatalf("destination called %d times, want 1", n)
	}
	if r := b.run(t, p.Key()); r.Status != dedupe.StatusDone || r.Calls != 1 {
		t.Fatalf("run %+v, want done after 1 call", r)
	}
}

func TestDeliverEventGoneFailsPermanently(t *testing.T) {
	t.Parallel()
	d := newDestination(t, status(200))
	b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: d.URL}})
	err := b.handler.Deliver(testCtx(t), jobs.DeliverPayload{Source: "src", EventID: "gone", Destination: "dst"})
	if !errors.Is(err, asynq.SkipRetry) || len(d.Calls()) != 0 {
		t.Fatalf("Deliver of a deleted event: %v, %d calls; want SkipRetry and no call", err, len(d.Calls()))
	}
	err = b.handler.Deliver(testCtx(t), jobs.DeliverPayload{Source: "src", EventID: "evt", Destination: "nowhere"})
	if !errors.Is(err, asynq.SkipRetry) {
		t.Fatalf("Deliver to an unconfigured destination: %v, want SkipRetry", err)
	}
}

// TestDeliverNeverCallsUnderAnotherRunsKey: when the row under the key
// belongs to another run (written under an earlier key encoding), the
// handler logs it and calls nothing: the destination would take this
// event's call for that run's, or answer from its result.
func TestDeliverNeverCallsUnderAnotherRunsKey(t *testing.T) {
	t.Parallel()
	d := newDestination(t, status(200))
	b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: d.URL}})
	b.record(t, "evt_1", body)
	b.record(t, "other", body)
	key := jobs.Key("src", "dst", "evt_1", 1)
	if _, err := b.schema.Pool.Exec(testCtx(t), `INSERT INTO job_runs (key, source, external_id, destination, generation, status, attempts, calls, max_attempts, retry_at)
        VALUES ($1, 'src', 'other', 'dst', 1, 'failed', 1, 1, 5, now())`, key); err != nil {
		t.Fatal(err)
	}
	err := b.handler.Deliver(testCtx(t), jobs.DeliverPayload{Source: "src", EventID: "evt_1", Destination: "dst"})
	if !errors.Is(err, asynq.SkipRetry) {
		t.Fatalf("Deliver: %v, want an error wrapping asynq.SkipRetry", err)
	}
	if n := len(d.Calls()); n != 0 {
		t.Fatalf("destination called %d times under another run's key", n)
	}
	if r := b.run(t, key); r.Status != dedupe.StatusFailed || r.Calls != 1 {
		t.Fatalf("the other run was changed: %+v", r)
	}
}
