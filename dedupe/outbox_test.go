package dedupe_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhookd/webhookd/dedupe"
)

func TestSettleEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	// A history of handed-off events, as a running gateway leaves it: the
	// outbox is full of dead rows until vacuum (a few hundred pages of
	// them here; while it is a few pages a scan is as cheap as lookups).
	b.exec(t, `INSERT INTO events (source, external_id, content_type, headers, payload)
        SELECT 'src', 'old_' || g, 'application/json', '{}', '{}' FROM generate_series(1, 30000) g`)
	b.exec(t, `INSERT INTO event_outbox (source, external_id) SELECT source, external_id FROM events`)
	b.exec(t, `DELETE FROM event_outbox`)
	// Statistics taken when nothing was pending (as after a vacuum on a
	// quiet system) make the outbox look free to scan whole.
	b.exec(t, `ANALYZE event_outbox`)
	var refs []dedupe.EventRef
	for i := range 16 {
		id := fmt.Sprintf("new_%d", i)
		b.recordEvent(t, id)
		refs = append(refs, dedupe.EventRef{Source: "src", ExternalID: id})
	}
	if n := b.schema.Int(t, `SELECT count(*) FROM event_outbox`); n != 16 {
		t.Fatalf("%d events in the outbox after recording 16", n)
	}

	settled := append(refs[:8:8], dedupe.EventRef{Source: "src", ExternalID: "old_1"}, dedupe.EventRef{Source: "src", ExternalID: "missing"})
	// The rows are found by key: a scan of the outbox, or of its primary
	// key's range, reads every row it ever had until vacuum removes them.
	read := b.statDelta(t, "pg_stat_get_blocks_fetched", "event_outbox", func(p *pgxpool.Pool) {
		if err := dedupe.New(p).SettleEvents(ctx, settled); err != nil {
			t.Fatal(err)
		}
	})
	if read > 10*int64(len(settled)) {
		t.Errorf("settling %d events read %d blocks of the outbox; want a few lookups by primary key each", len(settled), read)
	}

	if n := b.schema.Int(t, `SELECT count(*) FROM event_outbox WHERE external_id = ANY($1)`,
		[]string{"new_0", "new_1", "new_2", "new_3", "new_4", "new_5", "new_6", "new_7"}); n != 0 {
		t.Errorf("%d of the 8 events settled are still in the outbox", n)
	}
	if n := b.schema.Int(t, `SELECT count(*) FROM event_outbox WHERE external_id = ANY($1)`,
		[]string{"new_8", "new_9", "new_10", "new_11", "new_12", "new_13", "new_14", "new_15"}); n != 8 {
		t.Errorf("%d of the events not given are still pending, want 8", n)
	}
	if n := b.schema.Int(t, `SELECT count(*) FROM events`); n != 30016 {
		t.Errorf("%d events stored, want all 30016: settling touches only the outbox", n)
	}
	pending, err := b.store.PendingCount(ctx, []string{"src"})
	if err != nil {
		t.Fatal(err)
	}
	if pending != 8 {
		t.Errorf("pending count %d, want 8", pending)
	}
}

// TestClaimSettlesAnEventWhoseRunsAllExist: the claim that gives an
// event's last planned destination its first run takes the event out of
// the outbox; one that leaves a destination without a run, or whose event
// has no plan, leaves it for the reconciler.
func TestClaimSettlesAnEventWhoseRunsAllExist(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	record := func(id string, plan []string) {
		t.Helper()
		if _, err := dedupe.RecordBatch(ctx, b.schema.Pool, []dedupe.Event{{
			Source: "src", ExternalID: id, ContentType: "application/json", Payload: []byte(`{}`), Plan: plan,
		}}); err != nil {
			t.Fatal(err)
		}
	}
	claim := func(id, dest string, generation int) {
		t.Helper()
		c, err := b.store.Claim(ctx, dedupe.ClaimRequest{Key: "src:" + dest + ":" + id + fmt.Sprintf("#%d", generation),
			Source: "src", ExternalID: id, Destination: dest, Generation: generation, MaxAttempts: 3, Lease: time.Minute})
		if err != nil || c.Outcome != dedupe.Claimed {
			t.Fatalf("claim %s/%s: %+v, %v", id, dest, c, err)
		}
	}
	inOutbox := func(id string) bool {
		return b.schema.Int(t, `SELECT count(*) FROM event_outbox WHERE external_id = $1`, id) == 1
	}
	record("two", []string{"a", "b"})
	record("one", []string{"a"})
	record("unplanned", nil)
	record("replayed", []string{"a"})

	claim("two", "a", 1)
	if !inOutbox("two") {
		t.Fatal("the event left the outbox while destination b has no run")
	}
	claim("two", "b", 1)
	if inOutbox("two") {
		t.Error("the event stayed in the outbox after its last destination's claim")
	}
	claim("one", "a", 1)
	if inOutbox("one") {
		t.Error("a one-destination event stayed in the outbox after its claim")
	}
	claim("unplanned", "a", 1)
	if !inOutbox("unplanned") {
		t.Error("an event without a plan left the outbox: only the reconciler knows its destinations")
	}
	claim("replayed", "a", 2)
	if !inOutbox("replayed") {
		t.Error("a replay's run (generation 2) settled the event: its first-generation run does not exist")
	}
}

// TestClaimsAndSettlesAtOnce: claims of events' two destinations in
// batches of opposite orders, beside the reconciler's settle, never
// deadlock, and an event with a destination still without a run stays in
// the outbox.
func TestClaimsAndSettlesAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	const n = 300
	events := make([]dedupe.Event, n)
	var both []dedupe.EventRef // the even events: both destinations claimed
	for i := range events {
		id := fmt.Sprintf("evt_%03d", i)
		events[i] = dedupe.Event{Source: "src", ExternalID: id, ContentType: "application/json", Payload: []byte(`{}`), Plan: []string{"a", "b"}}
		if i%2 == 0 {
			both = append(both, dedupe.EventRef{Source: "src", ExternalID: id})
		}
	}
	if _, err := dedupe.RecordBatch(ctx, b.schema.Pool, events); err != nil {
		t.Fatal(err)
	}
	batcher := dedupe.NewRunBatcher(b.store, dedupe.BatcherConfig{MaxBatch: 16})
	defer batcher.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	claim := func(id, dest string) {
		_, err := batcher.Claim(ctx, dedupe.ClaimRequest{Key: "src:" + dest + ":" + id, Source: "src", ExternalID: id,
			Destination: dest, Generation: 1, MaxAttempts: 3, Lease: time.Minute})
		errs <- err
	}
	for i := range n {
		wg.Go(func() { claim(events[i].ExternalID, "a") })
		if j := n - 1 - i; j%2 == 0 {
			wg.Go(func() { claim(events[j].ExternalID, "b") })
		}
	}
	for i := 0; i < len(both); i += 30 {
		wg.Go(func() { errs <- b.store.SettleEvents(ctx, both[i:i+30]) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := b.schema.Int(t, `SELECT count(*) FROM event_outbox WHERE right(external_id, 1) IN ('1', '3', '5', '7', '9')`); n != 150 {
		t.Errorf("%d of the 150 events with destination b unclaimed are in the outbox", n)
	}
}

// TestMarkHandedOffIsHOT: marking events handed off rewrites no index.
// The relay marks every event once its tasks are queued; on a page full
// of outbox rows the update is a copy elsewhere plus an entry in both
// indexes, while the room the table keeps per page (migration 0032)
// makes it a HOT update.
func TestMarkHandedOffIsHOT(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	const n = 2000
	events := make([]dedupe.Event, n)
	refs := make([]dedupe.EventRef, n)
	for i := range events {
		id := fmt.Sprintf("evt_%04d", i)
		events[i] = dedupe.Event{Source: "src", ExternalID: id, Payload: []byte(`{}`), Plan: []string{"dst"}}
		refs[i] = dedupe.EventRef{Source: "src", ExternalID: id}
	}
	if _, err := dedupe.RecordBatch(ctx, b.schema.Pool, events); err != nil {
		t.Fatal(err)
	}
	for batch := range slices.Chunk(refs, 250) {
		if err := b.store.MarkHandedOff(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.schema.Int(t, `SELECT count(*) FROM event_outbox WHERE handed_off`); got != n {
		t.Fatalf("%d outbox rows marked, want %d", got, n)
	}
	// A backend reports its counts to the statistics views within
	// seconds of its transactions.
	const stats = `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relid = 'event_outbox'::regclass`
	var updated, hot int
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if err := b.schema.Pool.QueryRow(ctx, stats).Scan(&updated, &hot); err != nil {
			t.Fatal(err)
		}
		if updated >= n || time.Now().After(deadline) {
			break
		}
	}
	if updated != n || hot != n {
		t.Fatalf("outbox updates: %d, of them HOT: %d; want %d and %d", updated, hot, n, n)
	}
}
