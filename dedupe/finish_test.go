package dedupe_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dedupe"
)

func TestFinish(t *testing.T) {
	t.Parallel()

	t.Run("ConditionalOnTheClaimedCall", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.recordEvent(t, "evt_1")
		req := claimReq("evt_1", 5, time.Minute)
		old := mustClaim(t, b, req, dedupe.Claimed)
		// The worker outlives its lease; the sweeper hands the run on.
		b.exec(t, `UPDATE job_runs SET lease_until = now() - interval '1 second' WHERE key = $1`, req.Key)
		if swept, err := b.store.SweepExpired(testCtx(t), 10); err != nil || len(swept) != 1 {
			t.Fatalf("sweep: %v %v", swept, err)
		}
		cur := mustClaim(t, b, req, dedupe.Claimed)
		if cur.Call != old.Call+1 {
			t.Fatalf("second claim's call %d, want %d", cur.Call, old.Call+1)
		}
		// The old worker's late answer must not overwrite the new run...
		_, err := b.store.Finish(testCtx(t), req.Key, dedupe.Finish{Outcome: dedupe.OutcomePermanent, Call: old.Call, Called: true, StatusCode: 400})
		if !errors.Is(err, dedupe.ErrClaimLost) {
			t.Fatalf("finish with a lost claim: %v, want ErrClaimLost", err)
		}
		if r := b.run(t, req.Key); r.Status != dedupe.StatusRunning || r.Permanent {
			t.Fatalf("run %+v changed by a lost claim", r)
		}
		// ...but its call is still logged.
		if n := b.schema.Int(t, `SELECT count(*) FROM delivery_attempts WHERE key = $1 AND call = $2`, req.Key, old.Call); n != 1 {
			t.Fatalf("%d logged calls for the lost claim, want 1", n)
		}
		mustFinish(t, b, req.Key, dedupe.Finish{Outcome: dedupe.OutcomeDone, Call: cur.Call, Called: true, StatusCode: 201, Result: []byte(`{"status_code":201}`)})
		if r := b.run(t, req.Key); r.Status != dedupe.StatusDone || r.ResultStatusCode == nil || *r.ResultStatusCode != 201 || r.Attempts != 1 {
			t.Fatalf("run %+v, want done with result 201 and the crash counted", r)
		}
	})

	t.Run("FindsRunsByKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A history of finished runs, and statistics taken when nothing
		// was running: the index of running runs looks free to scan.
		b.exec(t, `INSERT INTO job_runs (key, source, external_id, destination, status, calls, attempts, max_attempts)
            SELECT 'src:dst:old_' || g, 'src', 'old_' || g, 'dst', 'done', 1, 1, 5 FROM generate_series(1, 2000) g`)
		b.exec(t, `ANALYZE job_runs`)
		var claims []dedupe.Claim
		scans := b.indexScans(t, "job_runs_lease_idx", func(s *dedupe.Store) {
			for i := range 8 {
				id := fmt.Sprintf("evt_%d", i)
				b.recordEvent(t, id)
				c, err := s.Claim(testCtx(t), claimReq(id, 5, time.Minute))
				if err != nil || c.Outcome != dedupe.Claimed {
					t.Fatalf("claim %s: %+v %v", id, c, err)
				}
				claims = append(claims, c)
			}
		})
		if scans != 0 {
			t.Errorf("claiming scanned the index of running runs %d times; want lookups by key", scans)
		}
		scans = b.indexScans(t, "job_runs_lease_idx", func(s *dedupe.Store) {
			for i, c := range claims {
				if _, err := s.Finish(testCtx(t), fmt.Sprintf("src:dst:evt_%d", i), dedupe.Finish{Outcome: dedupe.OutcomeDone, Call: c.Call, Called: true, StatusCode: 200}); err != nil {
					t.Fatal(err)
				}
			}
		})
		if scans != 0 {
			t.Errorf("finishing scanned the index of running runs %d times; want lookups by key", scans)
		}
		if n := b.schema.Int(t, `SELECT count(*) FROM job_runs WHERE key LIKE 'src:dst:evt_%' AND status = 'done'`); n != len(claims) {
			t.Errorf("%d runs done, want %d", n, len(claims))
		}
	})

	t.Run("RetriesCountUntilDead", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.recordEvent(t, "evt_1")
		req := claimReq("evt_1", 3, time.Minute)
		for i := 1; i <= 3; i++ {
			c := mustClaim(t, b, req, dedupe.Claimed)
			fin := mustFinish(t, b, req.Key, dedupe.Finish{Outcome: dedupe.OutcomeRetry, Call: c.Call, Called: true, StatusCode: 500, Error: "HTTP 500"})
			want := dedupe.StatusFailed
			if i == 3 {
				want = dedupe.StatusDead
			}
			if fin.Status != want || fin.Attempts != i {
				t.Fatalf("attempt %d: %+v, want %s with %d attempts", i, fin, want, i)
			}
		}
		mustClaim(t, b, req, dedupe.Ended)
		r := b.run(t, req.Key)
		if r.CompletedAt == nil || r.LastError == nil || *r.LastError != "HTTP 500" || r.Calls != 3 {
			t.Fatalf("dead run %+v, want completed with its last error after 3 calls", r)
		}
		if n := b.schema.Int(t, `SELECT count(*) FROM delivery_attempts WHERE key = $1 AND NOT succeeded AND status_code = 500`, req.Key); n != 3 {
			t.Fatalf("%d logged failed calls, want 3", n)
		}
	})

	t.Run("HoldIsNotAnAttempt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.recordEvent(t, "evt_1")
		req := claimReq("evt_1", 1, time.Minute)
		c := mustClaim(t, b, req, dedupe.Claimed)
		fin := mustFinish(t, b, req.Key, dedupe.Finish{Outcome: dedupe.OutcomeHold, Call: c.Call, Called: true, StatusCode: 429,
			Error: "wait", Wait: 2 * time.Second, Lease: time.Minute})
		if fin.Status != dedupe.StatusRunning || fin.Attempts != 0 {
			t.Fatalf("held: %+v, want running with 0 attempts", fin)
		}
		r := b.run(t, req.Key)
		if r.HeldUntil == nil || time.Until(*r.HeldUntil) < time.Second || r.LeaseUntil.Sub(*r.HeldUntil) < 59*time.Second {
			t.Fatalf("held run %+v, want held ~2s and leased a lease beyond", r)
		}
		during := mustClaim(t, b, req, dedupe.RunningElsewhere)
		if !during.RetryAt.Equal(*r.HeldUntil) {
			t.Fatalf("retry at %s, want the hold's end %s", during.RetryAt, *r.HeldUntil)
		}
		b.exec(t, `UPDATE job_runs SET held_until = now() - interval '1 millisecond' WHERE key = $1`, req.Key)
		after := mustClaim(t, b, req, dedupe.Claimed)
		// max_attempts 1 and one 429 behind it: the run still succeeds.
		fin = mustFinish(t, b, req.Key, dedupe.Finish{Outcome: dedupe.OutcomeDone, Call: after.Call, Called: true, StatusCode: 200, Result: []byte(`{}`)})
		if fin.Status != dedupe.StatusDone || fin.Attempts != 0 || after.Call != 2 {
			t.Fatalf("after the hold: %+v (call %d), want done, 0 attempts, call 2", fin, after.Call)
		}
	})

	t.Run("StaleLogsNoCall", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.recordEvent(t, "evt_1")
		req := claimReq("evt_1", 5, time.Minute)
		c := mustClaim(t, b, req, dedupe.Claimed)
		mustFinish(t, b, req.Key, dedupe.Finish{Outcome: dedupe.OutcomeStale, Call: c.Call})
		if n := b.schema.Int(t, `SELECT count(*) FROM delivery_attempts`); n != 0 {
			t.Fatalf("%d logged calls for a stale skip, want 0", n)
		}
	})
}
