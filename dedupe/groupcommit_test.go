package dedupe_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/testkit/pgtest"
)

// oneStatement is a Batcher config that puts n concurrent items in one
// statement: the first waits until all n are there.
func oneStatement(n int) dedupe.BatcherConfig {
	return dedupe.BatcherConfig{MaxBatch: 2 * n, MaxInFlight: 1, Linger: 10 * time.Second, LingerBelow: n}
}

// recordAll records evs at once through b, one goroutine each.
func recordAll(b *dedupe.Batcher, evs []dedupe.Event) ([]dedupe.Recorded, []error) {
	recs, errs := make([]dedupe.Recorded, len(evs)), make([]error, len(evs))
	var wg sync.WaitGroup
	for i := range evs {
		wg.Go(func() { recs[i], errs[i] = b.Record(context.Background(), evs[i]) })
	}
	wg.Wait()
	return recs, errs
}

// TestBatcherRefusedRowFailsAlone: events whose values Postgres refuses
// (invalid UTF-8, a NUL, a NUL escape in the headers' JSON) share a
// statement with good events. Only they fail, with ErrInvalidInput, and
// write nothing; every good event is recorded.
func TestBatcherRefusedRowFailsAlone(t *testing.T) {
	t.Parallel()
	schema := pgtest.New(t)
	db := &countingDB{DB: schema.Pool}
	const n = 40
	b := dedupe.NewBatcher(db, oneStatement(n))
	defer b.Close()

	evs := make([]dedupe.Event, n)
	bad := map[int]string{}
	for i := range evs {
		evs[i] = event("src", fmt.Sprintf("evt_%02d", i))
	}
	evs[3].ContentType, bad[3] = "application/json\xff", "invalid UTF-8 content type"
	evs[17].ExternalID, bad[17] = "evt_nul\x00", "NUL in the id"
	evs[30].Headers, bad[30] = []byte(`{"X-Test":["a\u0000b"]}`), "NUL escape in the headers"

	recs, errs := recordAll(b, evs)
	for i := range evs {
		if why, isBad := bad[i]; isBad {
			if !errors.Is(errs[i], dedupe.ErrInvalidInput) {
				t.Errorf("event %d (%s): error %v, want ErrInvalidInput", i, why, errs[i])
			}
			continue
		}
		if errs[i] != nil || !recs[i].Inserted {
			t.Errorf("good event %d shared a statement with bad ones: %+v %v", i, recs[i], errs[i])
		}
	}
	if got := schema.Int(t, `SELECT count(*) FROM events`); got != n-len(bad) {
		t.Errorf("%d events recorded, want %d", got, n-len(bad))
	}
	if got := schema.Int(t, `SELECT count(*) FROM event_outbox`); got != n-len(bad) {
		t.Errorf("%d events in the outbox, want %d", got, n-len(bad))
	}
	// One statement for all, then halves down to each bad event: far
	// fewer than one per event.
	if s := db.queries.Load(); s < 2 || s >= n {
		t.Errorf("%d statements for %d events with %d bad ones", s, n, len(bad))
	}

	// The bad ones fail again when sent again; the good ones are repeats.
	recs, errs = recordAll(b, evs)
	for i := range evs {
		_, isBad := bad[i]
		if isBad != errors.Is(errs[i], dedupe.ErrInvalidInput) || !isBad && (recs[i].Inserted || recs[i].Deliveries != 2) {
			t.Errorf("event %d sent again: %+v %v", i, recs[i], errs[i])
		}
	}
}

// TestBatcherConnectionErrorFailsTheBatch: an error that is not about one
// item's values (the connection broke, the statement timed out) fails
// every item of the statement, without retrying halves, and is not
// ErrInvalidInput: callers answer "retry later".
func TestBatcherConnectionErrorFailsTheBatch(t *testing.T) {
	t.Parallel()
	schema := pgtest.New(t)
	for _, code := range []string{"08006", "57014", "53300"} {
		db := &countingDB{DB: schema.Pool, err: fmt.Errorf("error recording events: %w", &pgconn.PgError{Code: code, Message: "injected"})}
		const n = 8
		b := dedupe.NewBatcher(db, oneStatement(n))
		evs := make([]dedupe.Event, n)
		for i := range evs {
			evs[i] = event("src", fmt.Sprintf("evt_%s_%d", code, i))
		}
		_, errs := recordAll(b, evs)
		b.Close()
		for i, err := range errs {
			if err == nil || errors.Is(err, dedupe.ErrInvalidInput) {
				t.Errorf("SQLSTATE %s, event %d: error %v, want a batch error that is not ErrInvalidInput", code, i, err)
			}
		}
		if s := db.queries.Load(); s != 1 {
			t.Errorf("SQLSTATE %s: %d statements, want 1 (no split)", code, s)
		}
	}
}
