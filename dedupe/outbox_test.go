package dedupe_test

import (
	"fmt"
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

// TestHandOffMarkIsPerTransaction: the record statement reports its
// transaction and how many events it inserted; the relay's mark is one
// row per transaction, which every event of it shows.
func TestHandOffMarkIsPerTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	record := func(ids ...string) int64 {
		events := make([]dedupe.Event, len(ids))
		for i, id := range ids {
			events[i] = dedupe.Event{Source: "src", ExternalID: id, Payload: []byte(`{}`), Plan: []string{"dst"}}
		}
		recorded, err := dedupe.RecordBatch(ctx, b.schema.Pool, events)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range recorded {
			if r.RecordXID == 0 || r.RecordXID != recorded[0].RecordXID || r.RecordedWith != len(ids) {
				t.Fatalf("%s: transaction %d with %d events; want %s's (%d), not 0, with %d",
					ids[i], r.RecordXID, r.RecordedWith, ids[0], recorded[0].RecordXID, len(ids))
			}
		}
		return recorded[0].RecordXID
	}
	first := record("a1", "a2", "a3")
	second := record("b1", "b2")
	if first == second {
		t.Fatalf("two statements recorded by one transaction %d", first)
	}
	// A repeat inserts nothing: it names no transaction.
	repeat, err := dedupe.RecordBatch(ctx, b.schema.Pool, []dedupe.Event{{Source: "src", ExternalID: "a2", Payload: []byte(`{}`)}})
	if err != nil || !repeat[0].Pending || repeat[0].RecordXID != 0 || repeat[0].RecordedWith != 0 {
		t.Fatalf("repeat of a2: %+v (%v), want pending, no transaction", repeat, err)
	}
	handedOff := func() map[string]bool {
		entries, _, err := b.store.OutboxPage(ctx, dedupe.OutboxCursor{}, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		events, err := b.store.UnsettledEvents(ctx, entries)
		if err != nil {
			t.Fatal(err)
		}
		out := make(map[string]bool, len(events))
		for _, e := range events {
			out[e.ExternalID] = e.HandedOff
		}
		return out
	}
	check := func(step string, marks int, want map[string]bool) {
		t.Helper()
		if got := handedOff(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: handed off %v, want %v", step, got, want)
		}
		if got := b.schema.Int(t, `SELECT count(*) FROM event_handoffs`); got != marks {
			t.Errorf("%s: %d marks, want %d", step, got, marks)
		}
	}
	check("recorded", 0, map[string]bool{"a1": false, "a2": false, "a3": false, "b1": false, "b2": false})
	if err := b.store.MarkHandedOff(ctx, []int64{first}); err != nil {
		t.Fatal(err)
	}
	check("first marked", 1, map[string]bool{"a1": true, "a2": true, "a3": true, "b1": false, "b2": false})
	if err := b.store.MarkHandedOff(ctx, []int64{first, second, second}); err != nil {
		t.Fatal(err)
	}
	check("both marked", 2, map[string]bool{"a1": true, "a2": true, "a3": true, "b1": true, "b2": true})
	if got := b.schema.Int(t, `SELECT count(*) FROM event_outbox WHERE xmin::text::bigint <> (record_xid::text::bigint % 4294967296)`); got != 0 {
		t.Errorf("%d outbox rows were written after their record: a mark rewrote them", got)
	}
}

// TestRetentionKeepsMarksOfQueuedEvents: retention deletes a hand-off
// mark only once no outbox row can be of its transaction.
func TestRetentionKeepsMarksOfQueuedEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	recorded, err := dedupe.RecordBatch(ctx, b.schema.Pool, []dedupe.Event{{Source: "src", ExternalID: "queued", Payload: []byte(`{}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.store.MarkHandedOff(ctx, []int64{recorded[0].RecordXID}); err != nil {
		t.Fatal(err)
	}
	ref := []dedupe.EventRef{{Source: "src", ExternalID: "queued"}}
	// The event has waited five hours in the outbox (its destination
	// paused), marked three hours ago; an orphan mark is older than it.
	b.exec(t, `UPDATE event_outbox SET received_at = now() - interval '5 hours'`)
	b.exec(t, `UPDATE event_handoffs SET handed_off_at = now() - interval '3 hours'`)
	b.exec(t, `INSERT INTO event_handoffs (record_xid, handed_off_at) VALUES ('2', now() - interval '7 hours')`)
	res, err := b.store.RunRetention(ctx, dedupe.RetentionOptions{Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if res.HandOffs != 1 || b.schema.Int(t, `SELECT count(*) FROM event_handoffs WHERE record_xid = '2'`) != 0 {
		t.Errorf("retention deleted %d marks, want the orphan one", res.HandOffs)
	}
	entries, _, err := b.store.OutboxPage(ctx, dedupe.OutboxCursor{}, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	events, err := b.store.UnsettledEvents(ctx, entries)
	if err != nil || len(events) != 1 || !events[0].HandedOff {
		t.Fatalf("after retention the queued event reads %+v (%v), want handed off", events, err)
	}
	if err := b.store.SettleEvents(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if res, err := b.store.RunRetention(ctx, dedupe.RetentionOptions{Retention: time.Hour}); err != nil || res.HandOffs != 1 {
		t.Errorf("retention after the event settled deleted %d marks (%v), want its mark", res.HandOffs, err)
	}
}
