package jobs_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/internal/testkit/redistest"
	"github.com/webhookd/webhookd/jobs"
)

// TestRateLimitWindow: rate_limit 4/s across two workers (each its own
// Steering and Asynq server on one Redis, as two processes): no window of
// one second, slid over the calls the destination recorded, holds more
// than 5 (N + 1) of them, and every event is delivered once.
func TestRateLimitWindow(t *testing.T) {
	t.Parallel()
	d := newDestination(t, nil)
	b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: d.URL, RateLimit: "4/s"}})
	r := redistest.New(t)
	enq := jobs.NewEnqueuer(r.Client, r.Queue, b.routes)
	for range 2 {
		h := jobs.NewHandler(b.store, jobs.HandlerConfig{
			Routes: b.routes, Lease: time.Minute, Logger: b.logger,
			Steering: jobs.NewSteering(jobs.NewEnqueuer(r.Client, r.Queue, b.routes), nil),
		})
		srv := jobs.NewServer(r.Client, h, jobs.ServerConfig{Queues: []string{r.Queue}, Concurrency: 8,
			ShutdownTimeout: 2 * time.Second, Logger: b.logger})
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Shutdown)
	}
	const n = 20
	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprintf("evt_%d", i))
	}
	b.enqueue(t, &queue{redis: r, enqueuer: enq}, ids...)
	pipelinetest.Eventually(t, 30*time.Second, "every run done", func() bool {
		return b.schema.Int(t, `SELECT count(*) FROM job_runs WHERE status = 'done'`) == n
	})
	calls := d.Calls()
	if len(calls) != n {
		t.Fatalf("%d calls, want %d", len(calls), n)
	}
	times := make([]time.Time, 0, n)
	for _, c := range calls {
		times = append(times, c.At)
	}
	slices.SortFunc(times, func(x, y time.Time) int { return x.Compare(y) })
	// The sink sees when calls arrive, not when the limiter let them go:
	// on a loaded machine one call can arrive a few hundred ms late and
	// bunch with the next, so the window allows 150 ms of that jitter.
	// Twice the rate still shows: 7 calls in any such window.
	const window = time.Second - 150*time.Millisecond
	most := 0
	for i := range times {
		in := 0
		for _, tm := range times[i:] {
			if tm.Sub(times[i]) <= window {
				in++
			}
		}
		most = max(most, in)
	}
	if most > 5 {
		t.Errorf("a %s window held %d calls, want at most 5 (4/s + 1)", window, most)
	}
	// The rate is kept, not undercut: 19 intervals of 250ms, give or
	// take the calls' own jitter and the holds' return (a loaded
	// machine's); a hold that came back only to the second would take
	// four times as long.
	if took, want := times[n-1].Sub(times[0]), time.Duration(n-1)*250*time.Millisecond; took < want-200*time.Millisecond || took > 2*want {
		t.Errorf("%d calls took %s, want about %s at 4/s", n, took, want)
	}
	t.Logf("%d calls in %s; the busiest %s held %d", n, times[n-1].Sub(times[0]).Round(time.Millisecond), window, most)
}
