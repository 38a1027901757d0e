package jobs_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/jobs"
)

// failingFinish is the real store whose first n Finish calls fail as a
// Postgres failover makes them fail.
type failingFinish struct {
	*dedupe.Store
	n     atomic.Int32
	tries atomic.Int32
}

func (f *failingFinish) Finish(ctx context.Context, key string, fin dedupe.Finish) (dedupe.Finished, error) {
	f.tries.Add(1)
	if f.n.Add(-1) >= 0 {
		return dedupe.Finished{}, errors.New("failed to connect to `host=127.0.0.1`: server is starting up")
	}
	return f.Store.Finish(ctx, key, fin)
}

// TestSettleOutlivesAFailover: the destination answered 2xx, and storing
// the outcome fails for a while (the primary is gone, the standby not yet
// promoted). The handler keeps trying and stores it once Postgres
// answers, so the run is done after one call: it is not left running for
// its lease to pass and be called again.
func TestSettleOutlivesAFailover(t *testing.T) {
	t.Parallel()
	d := newDestination(t, status(200))
	b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: d.URL}})
	store := &failingFinish{Store: b.store}
	store.n.Store(4)
	h := jobs.NewHandler(store, jobs.HandlerConfig{Routes: b.routes, Lease: time.Minute, Logger: testLogger(t)})
	b.record(t, "evt_1", body)
	p := jobs.DeliverPayload{Source: "src", EventID: "evt_1", Destination: "dst"}
	ctx, cancel := context.WithTimeout(testCtx(t), 30*time.Second)
	defer cancel()
	start := time.Now()
	if err := h.Deliver(ctx, p); err != nil {
		t.Fatalf("Deliver: %v, want nil (done)", err)
	}
	if got := store.tries.Load(); got != 5 {
		t.Errorf("Finish tried %d times, want 5 (4 failures, then stored)", got)
	}
	if r := b.run(t, p.Key()); r.Status != dedupe.StatusDone || r.Calls != 1 {
		t.Fatalf("run %+v, want done after one call", r)
	}
	if n := len(d.Calls()); n != 1 {
		t.Fatalf("destination called %d times, want once", n)
	}
	t.Logf("stored after %s", time.Since(start).Round(time.Millisecond))
}
