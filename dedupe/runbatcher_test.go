package dedupe_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dedupe"
)

// TestRunBatcherRaces claims through the batcher from many goroutines at
// once, some keys many times over: every key is claimed exactly once, the
// batch's copies are told it runs elsewhere, and outcomes are stored
// conditional on the claim.
func TestRunBatcherRaces(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	runs := dedupe.NewRunBatcher(b.store, dedupe.BatcherConfig{MaxBatch: 8, MaxInFlight: 2})
	defer runs.Close()

	const keys, copies = 12, 6
	for i := range keys {
		b.recordEvent(t, fmt.Sprintf("evt_%d", i))
	}
	type outcome struct {
		claim dedupe.Claim
		err   error
	}
	results := make([][]outcome, keys)
	for i := range results {
		results[i] = make([]outcome, copies)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for k := range keys {
		for c := range copies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				cl, err := runs.Claim(ctx, claimReq(fmt.Sprintf("evt_%d", k), 3, time.Minute))
				results[k][c] = outcome{cl, err}
			}()
		}
	}
	close(start)
	wg.Wait()

	for k := range keys {
		claimed := 0
		var call int
		for _, o := range results[k] {
			if o.err != nil {
				t.Fatalf("key %d: %v", k, o.err)
			}
			switch o.claim.Outcome {
			case dedupe.Claimed:
				claimed++
				call = o.claim.Call
				if string(o.claim.Event.Payload) != fmt.Sprintf(`{"id":"evt_%d"}`, k) {
					t.Errorf("key %d: claimed with payload %q", k, o.claim.Event.Payload)
				}
			case dedupe.RunningElsewhere:
			default:
				t.Errorf("key %d: outcome %v", k, o.claim.Outcome)
			}
		}
		if claimed != 1 {
			t.Fatalf("key %d claimed %d times, want 1", k, claimed)
		}
		key := fmt.Sprintf("src:dst:evt_%d", k)
		// A stale call number loses; the holder's wins, both batched at once.
		var stale, fresh error
		var done dedupe.Finished
		var fw sync.WaitGroup
		fw.Add(2)
		go func() {
			defer fw.Done()
			_, stale = runs.Finish(ctx, key, dedupe.Finish{Outcome: dedupe.OutcomeDone, Call: call + 1, Called: true, StatusCode: 200, Result: []byte(`{}`)})
		}()
		go func() {
			defer fw.Done()
			done, fresh = runs.Finish(ctx, key, dedupe.Finish{Outcome: dedupe.OutcomeDone, Call: call, Called: true, StatusCode: 200, Result: []byte(`{"status_code":200}`)})
		}()
		fw.Wait()
		if !errors.Is(stale, dedupe.ErrClaimLost) || fresh != nil || done.Status != dedupe.StatusDone {
			t.Fatalf("key %d: stale finish %v, fresh finish %v (%+v)", k, stale, fresh, done)
		}
		if r := b.run(t, key); r.Status != "done" || r.Calls != 1 || r.ResultStatusCode == nil || *r.ResultStatusCode != 200 {
			t.Errorf("key %d row: %+v", k, r)
		}
		again, err := runs.Claim(ctx, claimReq(fmt.Sprintf("evt_%d", k), 3, time.Minute))
		if err != nil || again.Outcome != dedupe.AlreadyDone || string(again.Result) != `{"status_code": 200}` {
			t.Errorf("key %d reclaim: %v %+v %s", k, err, again, again.Result)
		}
	}
	if n := b.schema.Int(t, `SELECT count(*) FROM delivery_attempts`); n != 2*keys {
		t.Errorf("%d attempts logged, want %d (every call, also the stale one)", n, 2*keys)
	}
}
