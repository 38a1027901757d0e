package dedupe_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
)

// raceClaims runs n claims of req at once and counts outcomes.
func raceClaims(t *testing.T, b *bundle, req dedupe.ClaimRequest, n int) map[dedupe.ClaimOutcome]int {
	t.Helper()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		got   = map[dedupe.ClaimOutcome]int{}
		start = make(chan struct{})
	)
	ctx := testCtx(t)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			c, err := b.store.Claim(ctx, req)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("claim: %v", err)
				return
			}
			got[c.Outcome]++
		}()
	}
	close(start)
	wg.Wait()
	return got
}

func TestClaimRaceExactlyOneWins(t *testing.T) {
	t.Parallel()
	const racers = 40

	t.Run("NewKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.recordEvent(t, "evt_1")
		req := claimReq("evt_1", 5, time.Minute)
		got := raceClaims(t, b, req, racers)
		if got[dedupe.Claimed] != 1 || got[dedupe.RunningElsewhere] != racers-1 {
			t.Fatalf("outcomes %v, want 1 claimed and %d running elsewhere", got, racers-1)
		}
		if r := b.run(t, req.Key); r.Status != dedupe.StatusRunning || r.Calls != 1 || r.Attempts != 0 {
			t.Fatalf("run %+v, want running with 1 call and 0 attempts", r)
		}
	})

	t.Run("RetryOfFailedRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.recordEvent(t, "evt_1")
		req := claimReq("evt_1", 5, time.Minute)
		c := mustClaim(t, b, req, dedupe.Claimed)
		mustFinish(t, b, req.Key, dedupe.Finish{Outcome: dedupe.OutcomeRetry, Call: c.Call, Called: true, StatusCode: 500, Error: "HTTP 500"})
		// Every racer finds the run failed (retryable); one takes it back,
		// and none may conclude the run ended.
		got := raceClaims(t, b, req, racers)
		if got[dedupe.Claimed] != 1 || got[dedupe.RunningElsewhere] != racers-1 {
			t.Fatalf("outcomes %v, want 1 claimed and %d running elsewhere", got, racers-1)
		}
		if r := b.run(t, req.Key); r.Status != dedupe.StatusRunning || r.Calls != 2 || r.Attempts != 1 {
			t.Fatalf("run %+v, want running with 2 calls and 1 attempt", r)
		}
	})

	t.Run("HoldPassed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.recordEvent(t, "evt_1")
		req := claimReq("evt_1", 1, time.Minute)
		c := mustClaim(t, b, req, dedupe.Claimed)
		mustFinish(t, b, req.Key, dedupe.Finish{Outcome: dedupe.OutcomeHold, Call: c.Call, Called: true, StatusCode: 429,
			Wait: time.Millisecond, Lease: time.Minute})
		time.Sleep(20 * time.Millisecond)
		got := raceClaims(t, b, req, racers)
		if got[dedupe.Claimed] != 1 || got[dedupe.RunningElsewhere] != racers-1 {
			t.Fatalf("outcomes %v, want 1 claimed and %d running elsewhere", got, racers-1)
		}
		if r := b.run(t, req.Key); r.Attempts != 0 || r.Calls != 2 {
			t.Fatalf("run %+v, want 0 attempts (a hold is not one) and 2 calls", r)
		}
	})

	t.Run("Done", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.recordEvent(t, "evt_1")
		req := claimReq("evt_1", 5, time.Minute)
		c := mustClaim(t, b, req, dedupe.Claimed)
		mustFinish(t, b, req.Key, dedupe.Finish{Outcome: dedupe.OutcomeDone, Call: c.Call, Called: true, StatusCode: 200,
			Result: []byte(`{"status_code":200}`)})
		got := raceClaims(t, b, req, racers)
		if got[dedupe.AlreadyDone] != racers {
			t.Fatalf("outcomes %v, want all already done", got)
		}
		again := mustClaim(t, b, req, dedupe.AlreadyDone)
		if string(again.Result) != `{"status_code": 200}` {
			t.Fatalf("stored result %s", again.Result)
		}
	})
}

func TestClaimOutcomes(t *testing.T) {
	t.Parallel()

	t.Run("RunningElsewhereUntilLease", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.recordEvent(t, "evt_1")
		req := claimReq("evt_1", 5, time.Minute)
		first := mustClaim(t, b, req, dedupe.Claimed)
		if first.Call != 1 || string(first.Event.Payload) != `{"id":"evt_1"}` || first.Event.ContentType != "application/json" {
			t.Fatalf("claim %+v: want call 1 with the stored event", first)
		}
		second := mustClaim(t, b, req, dedupe.RunningElsewhere)
		if d := time.Until(second.RetryAt); d < 50*time.Second || d > 61*time.Second {
			t.Fatalf("retry at %s from now, want the lease's end (~1m)", d)
		}
	})

	t.Run("PermanentAndDeadAndStaleEnd", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, tc := range []struct {
			id   string
			kind dedupe.Outcome
			max  int
			want string
		}{
			{"evt_perm", dedupe.OutcomePermanent, 5, dedupe.StatusFailed},
			{"evt_dead", dedupe.OutcomeRetry, 1, dedupe.StatusDead},
			{"evt_stale", dedupe.OutcomeStale, 5, dedupe.StatusSkippedStale},
		} {
			b.recordEvent(t, tc.id)
			req := claimReq(tc.id, tc.max, time.Minute)
			c := mustClaim(t, b, req, dedupe.Claimed)
			fin := mustFinish(t, b, req.Key, dedupe.Finish{Outcome: tc.kind, Call: c.Call, Called: tc.kind != dedupe.OutcomeStale, StatusCode: 400})
			if fin.Status != tc.want {
				t.Fatalf("%s: finished %s, want %s", tc.id, fin.Status, tc.want)
			}
			again := mustClaim(t, b, req, dedupe.Ended)
			if again.Status != tc.want {
				t.Fatalf("%s: claim reports %s, want %s", tc.id, again.Status, tc.want)
			}
		}
	})

	t.Run("EventGone", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.store.Claim(testCtx(t), claimReq("never_recorded", 5, time.Minute))
		if !errors.Is(err, dedupe.ErrNotFound) {
			t.Fatalf("claim of a missing event: %v, want ErrNotFound", err)
		}
		if r := b.run(t, "src:dst:never_recorded"); r.Status != dedupe.StatusFailed || !r.Permanent {
			t.Fatalf("run %+v, want failed permanently", r)
		}
	})
}

// TestClaimBlockedBehindConcurrentClaim makes the race deterministic: a
// second transaction takes a failed run back to running and commits while
// the claim waits for the row. The claim must report the run as running
// elsewhere, not as ended.
func TestClaimBlockedBehindConcurrentClaim(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.recordEvent(t, "evt_1")
	req := claimReq("evt_1", 5, time.Minute)
	c := mustClaim(t, b, req, dedupe.Claimed)
	mustFinish(t, b, req.Key, dedupe.Finish{Outcome: dedupe.OutcomeRetry, Call: c.Call, Called: true, StatusCode: 503})

	ctx := testCtx(t)
	tx, err := b.schema.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, `UPDATE job_runs SET status = 'running', calls = calls + 1,
        lease_until = now() + interval '1 minute' WHERE key = $1`, req.Key); err != nil {
		t.Fatal(err)
	}
	var blocker int
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&blocker); err != nil {
		t.Fatal(err)
	}
	done := make(chan dedupe.Claim, 1)
	go func() {
		c, err := b.store.Claim(ctx, req)
		if err != nil {
			t.Errorf("claim: %v", err)
		}
		done <- c
	}()
	pipelinetest.Eventually(t, 10*time.Second, "the claim waiting for the row lock", func() bool {
		return b.schema.Int(t, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))`, blocker) == 1
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.Outcome != dedupe.RunningElsewhere {
		t.Fatalf("claim behind a concurrent claim: %s (status %s), want running_elsewhere", got.Outcome, got.Status)
	}
}

// TestClaimChecksTheRunIsThisOne: a row found under the key that belongs
// to another event, destination or generation is not this run: the claim
// neither takes it (even when it is a retryable failure) nor answers from
// it (even when it is done); it reports ErrKeyConflict and changes nothing.
func TestClaimChecksTheRunIsThisOne(t *testing.T) {
	t.Parallel()
	for _, status := range []string{dedupe.StatusFailed, dedupe.StatusDone, dedupe.StatusRunning} {
		t.Run(status, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.recordEvent(t, "X")
			b.recordEvent(t, "X#2")
			// Generation 2 of X, under the key an id "X#2" had before keys
			// escaped '#'.
			b.exec(t, `INSERT INTO job_runs (key, source, external_id, destination, generation, status, calls, attempts, max_attempts, retry_at)
                VALUES ('src:dst:X#2', 'src', 'X', 'dst', 2, $1, 1, 1, 5, CASE WHEN $1 = 'failed' THEN now() END)`, status)
			for name, req := range map[string]dedupe.ClaimRequest{
				"another event":      {Key: "src:dst:X#2", Source: "src", ExternalID: "X#2", Destination: "dst", Generation: 1, MaxAttempts: 5, Lease: time.Minute},
				"another generation": {Key: "src:dst:X#2", Source: "src", ExternalID: "X", Destination: "dst", Generation: 3, MaxAttempts: 5, Lease: time.Minute},
				"another dest":       {Key: "src:dst:X#2", Source: "src", ExternalID: "X", Destination: "other", Generation: 2, MaxAttempts: 5, Lease: time.Minute},
			} {
				c, err := b.store.Claim(testCtx(t), req)
				if !errors.Is(err, dedupe.ErrKeyConflict) {
					t.Errorf("%s: claim %+v, %v; want ErrKeyConflict", name, c, err)
				}
			}
			if r := b.run(t, "src:dst:X#2"); r.Status != status || r.Calls != 1 || r.Attempts != 1 {
				t.Errorf("the other run was changed: %+v", r)
			}
			if n := b.schema.Int(t, `SELECT count(*) FROM delivery_attempts`); n != 0 {
				t.Errorf("%d calls logged, want none", n)
			}
		})
	}
}
