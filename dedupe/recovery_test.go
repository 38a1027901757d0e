package dedupe_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
)

func TestSweepExpired(t *testing.T) {
	t.Parallel()

	t.Run("ResetsOnlyPassedLeases", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, id := range []string{"expired", "live", "last_try"} {
			b.recordEvent(t, id)
		}
		mustClaim(t, b, claimReq("expired", 5, time.Minute), dedupe.Claimed)
		mustClaim(t, b, claimReq("live", 5, time.Minute), dedupe.Claimed)
		mustClaim(t, b, claimReq("last_try", 1, time.Minute), dedupe.Claimed)
		b.exec(t, `UPDATE job_runs SET lease_until = now() - interval '1 second' WHERE key IN ('src:dst:expired', 'src:dst:last_try')`)

		swept, got := sweepByKey(t, b)
		if len(got) != 2 || got["src:dst:expired"].Status != dedupe.StatusFailed || got["src:dst:last_try"].Status != dedupe.StatusDead {
			t.Fatalf("swept %+v, want expired→failed and last_try→dead", swept)
		}
		if r := got["src:dst:expired"]; r.Attempts != 1 || r.Source != "src" || r.ExternalID != "expired" || r.Destination != "dst" || r.Generation != 1 {
			t.Fatalf("swept run %+v, want attempts 1 and its names for the re-enqueue", r)
		}
		if r := b.run(t, "src:dst:live"); r.Status != dedupe.StatusRunning {
			t.Fatalf("live run %+v was swept", r)
		}
		if r := b.run(t, "src:dst:last_try"); r.CompletedAt == nil || r.LastError == nil {
			t.Fatalf("dead run %+v, want completed with a reason", r)
		}
		// The reset run is retried with the same key.
		c := mustClaim(t, b, claimReq("expired", 5, time.Minute), dedupe.Claimed)
		if c.Call != 2 || c.Attempts != 1 {
			t.Fatalf("retry claim %+v, want call 2 with 1 attempt", c)
		}
	})

	// A held run (fifo order, a destination's Retry-After) whose lease
	// passes while its task waits in a long queue made no call: it is
	// made due again, not counted as an attempt, and never made dead so.
	t.Run("HeldRunIsNoAttempt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, id := range []string{"held", "in_call"} {
			b.recordEvent(t, id)
		}
		mustClaim(t, b, claimReq("held", 2, time.Minute), dedupe.Claimed)
		mustClaim(t, b, claimReq("in_call", 2, time.Minute), dedupe.Claimed)
		b.exec(t, `UPDATE job_runs SET attempts = 1, lease_until = now() - interval '1 second' WHERE key IN ('src:dst:held', 'src:dst:in_call')`)
		b.exec(t, `UPDATE job_runs SET held_until = now() + interval '1 second', hold_reason = 'order: waiting behind e0' WHERE key = 'src:dst:held'`)
		_, got := sweepByKey(t, b)
		if r := got["src:dst:held"]; r.Status != dedupe.StatusFailed || r.Attempts != 1 {
			t.Errorf("held run swept as %+v, want failed (due again) with its 1 attempt", r)
		}
		if r := got["src:dst:in_call"]; r.Status != dedupe.StatusDead || r.Attempts != 2 {
			t.Errorf("run in its call swept as %+v, want dead at its 2nd attempt", r)
		}
	})

	t.Run("BoundedBatches", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, id := range ids("e", 7) {
			b.recordEvent(t, id)
			mustClaim(t, b, claimReq(id, 5, time.Minute), dedupe.Claimed)
		}
		b.exec(t, `UPDATE job_runs SET lease_until = now() - interval '1 second'`)
		var sizes []int
		for {
			swept, err := b.store.SweepExpired(testCtx(t), 3)
			if err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, len(swept))
			if len(swept) < 3 {
				break
			}
		}
		if len(sizes) != 3 || sizes[0] != 3 || sizes[1] != 3 || sizes[2] != 1 {
			t.Fatalf("batch sizes %v, want [3 3 1]", sizes)
		}
	})

	t.Run("ConcurrentSweepersResetEachRunOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, id := range ids("e", 30) {
			b.recordEvent(t, id)
			mustClaim(t, b, claimReq(id, 5, time.Minute), dedupe.Claimed)
		}
		b.exec(t, `UPDATE job_runs SET lease_until = now() - interval '1 second'`)
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			seen  = map[string]int{}
			start = make(chan struct{})
		)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for {
					swept, err := b.store.SweepExpired(testCtx(t), 4)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					for _, r := range swept {
						seen[r.Key]++
					}
					n := len(seen)
					mu.Unlock()
					if n == 30 {
						return
					}
				}
			}()
		}
		close(start)
		wg.Wait()
		for k, n := range seen {
			if n != 1 {
				t.Errorf("%s reset %d times", k, n)
			}
		}
		if n := b.schema.Int(t, `SELECT count(*) FROM job_runs WHERE status = 'failed' AND attempts = 1`); n != 30 {
			t.Fatalf("%d runs reset with attempts 1, want 30", n)
		}
	})
}

// TestCallLog: a claimed call writes no row until its outcome is stored
// (one row per call) and shows in flight from its run; a sweep logs a
// call whose worker died as one of unknown outcome, dated when the call
// started, and that worker's late answer still lands on its row.
func TestCallLog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	b.recordEvent(t, "evt_1")
	req := claimReq("evt_1", 5, time.Minute)
	first := mustClaim(t, b, req, dedupe.Claimed)
	state := func(call int) string {
		var s string
		if err := b.schema.Pool.QueryRow(ctx, `SELECT string_agg(state || '/' || COALESCE(outcome, ''), ',') FROM delivery_attempts WHERE key = $1 AND call = $2`,
			req.Key, call).Scan(&s); err != nil {
			t.Fatalf("call %d: %v", call, err)
		}
		return s
	}
	if n := b.schema.Int(t, `SELECT count(*) FROM delivery_attempts`); n != 0 {
		t.Fatalf("%d calls logged by the claim, want none until the outcome", n)
	}
	d, err := b.store.GetEvent(ctx, "src", "evt_1", dedupe.DestinationView{})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Attempts) != 1 || d.Attempts[0].State != dedupe.CallCalling || d.Attempts[0].Call != first.Call || d.Attempts[0].CreatedAt.IsZero() {
		t.Fatalf("attempts shown after the claim: %+v, want the claimed call in flight", d.Attempts)
	}
	// The worker dies mid-call; the sweep takes the run back.
	b.exec(t, `UPDATE job_runs SET lease_until = now() - interval '1 second' WHERE key = $1`, req.Key)
	if swept, err := b.store.SweepExpired(ctx, 10); err != nil || len(swept) != 1 {
		t.Fatalf("sweep: %v %v", swept, err)
	}
	if got := state(first.Call); got != "unknown/" {
		t.Fatalf("call after the sweep: %s, want unknown", got)
	}
	if n := b.schema.Int(t, `SELECT count(*) FROM delivery_attempts a JOIN job_runs r ON r.key = a.key WHERE a.created_at = r.started_at`); n != 1 {
		t.Fatalf("the unknown call is not dated when the call started")
	}
	total, calls, err := b.store.UnknownCalls(ctx, 0)
	if err != nil || total != 1 || len(calls) != 1 || calls[0].Key != req.Key || calls[0].Call != first.Call || calls[0].LaterSuccess {
		t.Fatalf("unknown calls: %d %+v %v; want the one, with no later success", total, calls, err)
	}
	// A second sweep of the same run (it is failed now) logs nothing more.
	if swept, err := b.store.SweepExpired(ctx, 10); err != nil || len(swept) != 0 {
		t.Fatalf("second sweep: %v %v", swept, err)
	}
	second := mustClaim(t, b, req, dedupe.Claimed)
	mustFinish(t, b, req.Key, dedupe.Finish{Outcome: dedupe.OutcomeDone, Call: second.Call, Called: true, StatusCode: 200, Result: []byte(`{}`)})
	if got := state(second.Call); got != "finished/done" {
		t.Fatalf("second call: %s, want finished/done", got)
	}
	if _, calls, _ := b.store.UnknownCalls(ctx, 0); len(calls) != 1 || !calls[0].LaterSuccess {
		t.Fatalf("unknown calls %+v, want the first, followed by a success", calls)
	}
	// The first worker was alive after all and reports late: its outcome
	// is known now, though the run is no longer its own.
	_, err = b.store.Finish(ctx, req.Key, dedupe.Finish{Outcome: dedupe.OutcomeRetry, Call: first.Call, Called: true, StatusCode: 502, Error: "HTTP 502"})
	if !errors.Is(err, dedupe.ErrClaimLost) {
		t.Fatalf("late finish: %v, want ErrClaimLost", err)
	}
	if got := state(first.Call); got != "finished/retry" {
		t.Fatalf("first call after its late answer: %s, want finished/retry", got)
	}
	if total, _, _ := b.store.UnknownCalls(ctx, 0); total != 0 {
		t.Fatalf("%d unknown calls after the late answer, want 0", total)
	}
	if d, err := b.store.GetEvent(ctx, "src", "evt_1", dedupe.DestinationView{}); err != nil || len(d.Attempts) != 2 ||
		d.Attempts[0].State != dedupe.CallFinished || d.Attempts[1].State != dedupe.CallFinished {
		t.Fatalf("attempts shown at the end: %+v %v, want the two calls finished", d.Attempts, err)
	}
}

// TestCallLogSweep: the sweep logs an unknown call only for a run swept
// in its claimed call: not for a held run (its call's outcome is stored,
// or it made none), not for an ordered event whose guard never let the
// call go; and a late answer that raced the sweep (both wrote a row for
// the call) leaves a call of known outcome, not an unknown one.
func TestCallLogSweep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	expire := func(key string) {
		b.exec(t, `UPDATE job_runs SET lease_until = now() - interval '1 second' WHERE key = $1`, key)
	}
	logged := func(key string) string {
		var s string
		if err := b.schema.Pool.QueryRow(ctx, `SELECT COALESCE(string_agg(call || ':' || state, ',' ORDER BY id), '') FROM delivery_attempts WHERE key = $1`,
			key).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}

	// Held after a call (429), then its hold's lease passes unclaimed.
	b.recordEvent(t, "held_called")
	held := claimReq("held_called", 5, time.Minute)
	c := mustClaim(t, b, held, dedupe.Claimed)
	mustFinish(t, b, held.Key, dedupe.Finish{Outcome: dedupe.OutcomeHold, Call: c.Call, Called: true, StatusCode: 429, Wait: time.Second, Lease: time.Minute})
	// Held without a call (a rate limit held it).
	b.recordEvent(t, "held_uncalled")
	uncalled := claimReq("held_uncalled", 5, time.Minute)
	c = mustClaim(t, b, uncalled, dedupe.Claimed)
	mustFinish(t, b, uncalled.Key, dedupe.Finish{Outcome: dedupe.OutcomeHold, Call: c.Call, Wait: time.Second, Lease: time.Minute})
	// An ordered event whose worker died before its guard decided.
	b.recordEvent(t, "ordered")
	b.exec(t, `UPDATE events SET order_entity = 'cus_1', order_version = '1' WHERE external_id = 'ordered'`)
	ordered := claimReq("ordered", 5, time.Minute)
	mustClaim(t, b, ordered, dedupe.Claimed)
	// An ordered event whose guard let the call go: its row is marked.
	b.recordEvent(t, "ordered_called")
	b.exec(t, `UPDATE events SET order_entity = 'cus_2', order_version = '1' WHERE external_id = 'ordered_called'`)
	orderedCalled := claimReq("ordered_called", 5, time.Minute)
	c = mustClaim(t, b, orderedCalled, dedupe.Claimed)
	if v, err := b.store.AdvanceVersion(ctx, dedupe.VersionRequest{Source: "src", Destination: "dst", Entity: "cus_2", Version: "1",
		Key: orderedCalled.Key, Call: c.Call, Hold: time.Minute}); err != nil || v.Outcome != dedupe.VersionFresh {
		t.Fatalf("advance: %+v %v", v, err)
	}
	for _, k := range []string{held.Key, uncalled.Key, ordered.Key, orderedCalled.Key} {
		expire(k)
	}
	if swept, err := b.store.SweepExpired(ctx, 10); err != nil || len(swept) != 4 {
		t.Fatalf("sweep: %v %v, want the 4 runs", swept, err)
	}
	for key, want := range map[string]string{held.Key: "1:finished", uncalled.Key: "", ordered.Key: "", orderedCalled.Key: "1:unknown"} {
		if got := logged(key); got != want {
			t.Errorf("%s logged %q after the sweep, want %q", key, got, want)
		}
	}

	// A late answer and the sweep, each unaware of the other's row.
	b.recordEvent(t, "raced")
	raced := claimReq("raced", 5, time.Minute)
	c = mustClaim(t, b, raced, dedupe.Claimed)
	expire(raced.Key)
	if _, err := b.store.SweepExpired(ctx, 10); err != nil {
		t.Fatal(err)
	}
	b.exec(t, `INSERT INTO delivery_attempts (key, call, status_code, succeeded, duration_ms, state, outcome)
        VALUES ($1, $2, 200, true, 5, 'finished', 'done')`, raced.Key, c.Call)
	if got := logged(raced.Key); got != "1:unknown,1:finished" {
		t.Fatalf("raced rows %q", got)
	}
	if total, calls, err := b.store.UnknownCalls(ctx, 0); err != nil || total != 1 || calls[0].Key != orderedCalled.Key {
		t.Fatalf("unknown calls %d %+v %v, want only the ordered call (the raced one's outcome is stored)", total, calls, err)
	}
	d, err := b.store.GetEvent(ctx, "src", "raced", dedupe.DestinationView{})
	if err != nil || len(d.Attempts) != 1 || d.Attempts[0].State != dedupe.CallFinished || !d.Attempts[0].Succeeded {
		t.Fatalf("raced attempts shown: %+v %v, want the finished call only", d.Attempts, err)
	}
}

// TestRetryAt: a run waiting for a try has retry_at set (a retry's
// backoff, a hold's end, a replay's now); a claim, success or final
// failure clears it.
func TestRetryAt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	retryIn := func(key string) *float64 {
		var secs *float64
		if err := b.schema.Pool.QueryRow(ctx, `SELECT extract(epoch FROM retry_at - now())::float8 FROM job_runs WHERE key = $1`, key).Scan(&secs); err != nil {
			t.Fatal(err)
		}
		return secs
	}
	near := func(got *float64, want float64) bool { return got != nil && *got > want-2 && *got <= want+0.5 }

	b.recordEvent(t, "evt_1")
	req := claimReq("evt_1", 2, time.Minute)
	c := mustClaim(t, b, req, dedupe.Claimed)
	if got := retryIn(req.Key); got != nil {
		t.Fatalf("retry_at while running: %v, want none", *got)
	}
	mustFinish(t, b, req.Key, dedupe.Finish{Outcome: dedupe.OutcomeRetry, Call: c.Call, Called: true, StatusCode: 500, Wait: 30 * time.Second})
	if got := retryIn(req.Key); !near(got, 30) {
		t.Fatalf("retry_at after a failed attempt: in %v s, want 30", got)
	}
	c = mustClaim(t, b, req, dedupe.Claimed)
	if got := retryIn(req.Key); got != nil {
		t.Fatalf("retry_at after the retry's claim: %v, want none", *got)
	}
	mustFinish(t, b, req.Key, dedupe.Finish{Outcome: dedupe.OutcomeHold, Call: c.Call, Called: true, StatusCode: 429, Wait: 20 * time.Second, Lease: time.Minute})
	if got := retryIn(req.Key); !near(got, 20) {
		t.Fatalf("retry_at after a hold: in %v s, want 20", got)
	}
	b.exec(t, `UPDATE job_runs SET held_until = now(), retry_at = now() WHERE key = $1`, req.Key)
	c = mustClaim(t, b, req, dedupe.Claimed)
	fin := mustFinish(t, b, req.Key, dedupe.Finish{Outcome: dedupe.OutcomeRetry, Call: c.Call, Called: true, StatusCode: 500, Wait: time.Minute})
	if fin.Status != dedupe.StatusDead || retryIn(req.Key) != nil {
		t.Fatalf("after the last attempt: %s with retry_at %v, want dead with none", fin.Status, retryIn(req.Key))
	}
	if _, ok, err := b.store.ReopenRun(ctx, req.Key, "alice", "test"); err != nil || !ok {
		t.Fatalf("reopen: %v %v", ok, err)
	}
	if got := retryIn(req.Key); !near(got, 0) {
		t.Fatalf("retry_at after a replay: in %v s, want now", got)
	}
}

// TestDueRuns: runs whose try was due more than the slack ago come back
// earliest first, whatever their status; a walk with a cursor sees each
// once; runs due later, running or settled do not come back.
func TestDueRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	b.exec(t, `INSERT INTO job_runs (key, source, external_id, destination, status, max_attempts, retry_at, held_until) VALUES
        ('src:dst:a', 'src', 'a', 'dst', 'failed', 5, now() - interval '50 seconds', NULL),
        ('src:dst:b', 'src', 'b', 'dst', 'running', 5, now() - interval '40 seconds', now() - interval '40 seconds'),
        ('src:dst:c', 'src', 'c', 'dst', 'failed', 5, now() - interval '30 seconds', NULL),
        ('src:dst:d', 'src', 'd', 'dst', 'failed', 5, now() - interval '1 second', NULL),
        ('src:dst:e', 'src', 'e', 'dst', 'failed', 5, now() + interval '1 minute', NULL),
        ('src:dst:f', 'src', 'f', 'dst', 'done', 5, NULL, NULL),
        ('src:dst:g', 'src', 'g', 'dst', 'running', 5, NULL, NULL)`)
	var (
		seen   []string
		cursor dedupe.RunCursor
	)
	for range 5 {
		runs, next, err := b.store.DueRuns(ctx, cursor, 10*time.Second, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			seen = append(seen, r.ExternalID+"/"+r.Status)
			if r.Source != "src" || r.Destination != "dst" || r.Generation != 1 || r.Due.IsZero() {
				t.Errorf("run %+v lacks its names or due time", r)
			}
		}
		if len(runs) < 2 {
			break
		}
		cursor = next
	}
	if got := fmt.Sprint(seen); got != "[a/failed b/running c/failed]" {
		t.Fatalf("due runs %s, want [a/failed b/running c/failed]", got)
	}
}

// sweepByKey runs one sweep of up to 10 runs and returns what it swept,
// also by key.
func sweepByKey(t *testing.T, b *bundle) ([]dedupe.UnsettledRun, map[string]dedupe.UnsettledRun) {
	t.Helper()
	swept, err := b.store.SweepExpired(testCtx(t), 10)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]dedupe.UnsettledRun{}
	for _, r := range swept {
		got[r.Key] = r
	}
	return swept, got
}

// TestUnsettledEvents: the outbox walk pages through events older than
// the minimum age, oldest first; their events come back, in the same
// order, with the destinations that already have a run; settling takes
// them out.
func TestUnsettledEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	for _, id := range []string{"e1", "e2", "e3", "young"} {
		b.recordEvent(t, id)
	}
	b.exec(t, `UPDATE event_outbox SET received_at = now() - interval '1 minute' + (ascii(substr(external_id, 2)) - 48) * interval '1 second'
        WHERE external_id <> 'young'`)
	b.insertRun(t, "e2", "a", 1, "done")
	b.insertRun(t, "e2", "b", 2, "done") // a forced replay's run does not count
	var (
		got    []string
		cursor dedupe.OutboxCursor
	)
	for range 5 {
		entries, next, err := b.store.OutboxPage(ctx, cursor, 10*time.Second, 2)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := b.store.UnsettledEvents(ctx, entries)
		if err != nil {
			t.Fatal(err)
		}
		for i, ev := range evs {
			if ev.ExternalID != entries[i].ExternalID || !ev.ReceivedAt.Equal(entries[i].ReceivedAt) {
				t.Errorf("event %d is %s at %s, its entry %s at %s", i, ev.ExternalID, ev.ReceivedAt, entries[i].ExternalID, entries[i].ReceivedAt)
			}
			got = append(got, fmt.Sprintf("%s%v", ev.ExternalID, ev.Claimed))
		}
		if len(entries) < 2 {
			break
		}
		cursor = next
	}
	if s := fmt.Sprint(got); s != "[e1[] e2[a] e3[]]" {
		t.Fatalf("unsettled %s, want [e1[] e2[a] e3[]] (oldest first, young left out)", s)
	}
	if err := b.store.SettleEvents(ctx, []dedupe.EventRef{{Source: "src", ExternalID: "e2"}}); err != nil {
		t.Fatal(err)
	}
	if n, err := b.store.PendingCount(ctx, []string{"src"}); err != nil || n != 3 {
		t.Fatalf("pending %d %v, want 3 after settling one", n, err)
	}
	// Issue 23, I4: the events of a source no longer configured are not
	// a backlog (they stay until retention).
	if n, err := b.store.PendingCount(ctx, []string{"other"}); err != nil || n != 0 {
		t.Fatalf("pending of another source %d %v, want 0", n, err)
	}
}

// TestRecoveryLock: one pass at a time; a second caller is told at once,
// and the lock is free again when the first pass ends, or when its
// connection has been idle longer than the hold.
func TestRecoveryLock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	inside := make(chan struct{})
	release := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- b.store.WithRecoveryLock(ctx, time.Minute, func(context.Context) error {
			close(inside)
			<-release
			return nil
		})
	}()
	<-inside
	ran := false
	err := b.store.WithRecoveryLock(ctx, time.Minute, func(context.Context) error { ran = true; return nil })
	if !errors.Is(err, dedupe.ErrRecoveryBusy) || ran {
		t.Fatalf("second pass while the first runs: %v (ran %v), want ErrRecoveryBusy", err, ran)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := b.store.WithRecoveryLock(ctx, time.Minute, func(context.Context) error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("pass after the first ended: %v (ran %v)", err, ran)
	}
	// A pass that outlives its hold (its process stuck or cut off) loses
	// the lock: the server ends its idle transaction.
	stuck := make(chan struct{})
	go func() {
		_ = b.store.WithRecoveryLock(ctx, time.Second, func(context.Context) error { <-stuck; return nil })
	}()
	defer close(stuck)
	pipelinetest.Eventually(t, 10*time.Second, "the lock freed by the server", func() bool {
		err := b.store.WithRecoveryLock(ctx, time.Minute, func(context.Context) error { return nil })
		return err == nil
	})
}
