package dedupe_test

import (
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dedupe"
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

		swept, err := b.store.SweepExpired(testCtx(t), 10)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]dedupe.SweptRun{}
		for _, r := range swept {
			got[r.Key] = r
		}
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
