package dedupe_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/testkit/pgtest"
)

func event(source, id string) dedupe.Event {
	return dedupe.Event{
		Source: source, ExternalID: id, ContentType: "application/json",
		Headers: []byte(`{"X-Test":["1"]}`), Payload: []byte(`{"id":"` + id + `"}`),
	}
}

// TestRepeatWritesOnlyItsCount: a repeat delivery never writes the
// event's wide row (events is not updated at all); it is counted in the
// event's narrow event_repeats row, and counting a further repeat
// rewrites that row in its own page (a HOT update, no index entry),
// which needs the room event_repeats' fillfactor leaves.
func TestRepeatWritesOnlyItsCount(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	payload := bytes.Repeat([]byte("x"), 1024)
	var evs []dedupe.Event
	for i := range 40 {
		evs = append(evs, dedupe.Event{Source: "src", ExternalID: fmt.Sprintf("evt_%02d", i),
			ContentType: "application/json", Payload: payload})
	}
	if _, err := dedupe.RecordBatch(ctx, b.schema.Pool, evs); err != nil {
		t.Fatal(err)
	}
	var updated, inserted, hot int64
	err := pgx.BeginFunc(ctx, b.schema.Pool, func(tx pgx.Tx) error {
		for round := range 2 {
			for _, ev := range evs {
				if _, err := dedupe.RecordBatch(ctx, tx, []dedupe.Event{ev}); err != nil {
					return fmt.Errorf("round %d: %w", round, err)
				}
			}
		}
		return tx.QueryRow(ctx, `SELECT pg_stat_get_xact_tuples_updated('events'::regclass),
            pg_stat_get_xact_tuples_inserted('event_repeats'::regclass),
            pg_stat_get_xact_tuples_hot_updated('event_repeats'::regclass)`).Scan(&updated, &inserted, &hot)
	})
	if err != nil {
		t.Fatal(err)
	}
	if updated != 0 {
		t.Errorf("%d events rows updated by repeats, want none", updated)
	}
	if inserted != int64(len(evs)) || hot != int64(len(evs)) {
		t.Errorf("event_repeats: %d inserts and %d HOT updates, want %d of each", inserted, hot, len(evs))
	}
	if n := b.schema.Int(t, `SELECT count(*) FROM event_deliveries WHERE deliveries = 3`); n != len(evs) {
		t.Errorf("%d events counted three times, want %d", n, len(evs))
	}
}

func TestRecordBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := pgtest.New(t)

	t.Run("copies within one batch count as repeats in order", func(t *testing.T) {
		got, err := dedupe.RecordBatch(ctx, schema.Pool, []dedupe.Event{
			event("s", "a"), event("s", "b"), event("s", "a"), event("t", "a"), event("s", "a"),
		})
		if err != nil {
			t.Fatal(err)
		}
		want := []struct {
			inserted   bool
			deliveries int
			state      string
		}{{true, 1, "received"}, {true, 1, "received"}, {false, 2, "received"}, {true, 1, "received"}, {false, 3, "received"}}
		for i, w := range want {
			if got[i].Inserted != w.inserted || got[i].Deliveries != w.deliveries || !got[i].Pending || got[i].State != w.state {
				t.Errorf("event %d: got %+v, want inserted=%v deliveries=%d pending state %q", i, got[i], w.inserted, w.deliveries, w.state)
			}
		}
		var deliveries int
		if err := schema.Pool.QueryRow(ctx, `SELECT deliveries FROM event_deliveries WHERE source='s' AND external_id='a'`).Scan(&deliveries); err != nil {
			t.Fatal(err)
		}
		if deliveries != 3 {
			t.Errorf("stored deliveries = %d, want 3", deliveries)
		}
	})

	t.Run("a later batch sees repeats and the event state", func(t *testing.T) {
		if _, err := schema.Pool.Exec(ctx, `INSERT INTO job_runs (key, source, external_id, destination, status, max_attempts)
VALUES ('s:d:b', 's', 'b', 'd', 'done', 3)`); err != nil {
			t.Fatal(err)
		}
		if err := dedupe.New(schema.Pool).SettleEvents(ctx, []dedupe.EventRef{{Source: "s", ExternalID: "b"}}); err != nil {
			t.Fatal(err)
		}
		got, err := dedupe.RecordBatch(ctx, schema.Pool, []dedupe.Event{event("s", "b")})
		if err != nil {
			t.Fatal(err)
		}
		r := got[0]
		if r.Inserted || r.Deliveries != 2 || r.Pending || r.State != "done" {
			t.Fatalf("got %+v, want a handed-off repeat in state done", r)
		}
	})

	t.Run("payload and headers are stored as received", func(t *testing.T) {
		ev := event("raw", "x")
		ev.Payload = []byte{0x00, 0xff, '{', '}'}
		if _, err := dedupe.RecordBatch(ctx, schema.Pool, []dedupe.Event{ev}); err != nil {
			t.Fatal(err)
		}
		var payload []byte
		var header string
		if err := schema.Pool.QueryRow(ctx, `SELECT payload, headers->'X-Test'->>0 FROM events WHERE source='raw'`).Scan(&payload, &header); err != nil {
			t.Fatal(err)
		}
		if string(payload) != string(ev.Payload) || header != "1" {
			t.Errorf("stored payload %q header %q", payload, header)
		}
	})
}

// TestBatcherConcurrentCopies has many goroutines record copies of the
// same events at once: exactly one insert per event, and the delivery
// numbers handed out are exactly 1..copies.
func TestBatcherConcurrentCopies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := pgtest.New(t)
	b := dedupe.NewBatcher(schema.Pool, dedupe.BatcherConfig{MaxBatch: 16, MaxInFlight: 3})
	defer b.Close()

	const events, copies = 30, 12
	type answer struct {
		inserted   bool
		deliveries int
	}
	answers := make([][]answer, events)
	for i := range answers {
		answers[i] = make([]answer, copies)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for e := range events {
		for c := range copies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				rec, err := b.Record(ctx, event("s", fmt.Sprintf("evt_%d", e)))
				if err != nil {
					t.Error(err)
					return
				}
				answers[e][c] = answer{rec.Inserted, rec.Deliveries}
			}()
		}
	}
	close(start)
	wg.Wait()
	for e := range events {
		inserted := 0
		seen := map[int]bool{}
		for _, a := range answers[e] {
			if a.inserted {
				inserted++
			}
			seen[a.deliveries] = true
		}
		if inserted != 1 {
			t.Errorf("event %d inserted %d times", e, inserted)
		}
		for n := 1; n <= copies; n++ {
			if !seen[n] {
				t.Errorf("event %d: delivery number %d never handed out (%v)", e, n, answers[e])
				break
			}
		}
	}
	var rows, total int
	if err := schema.Pool.QueryRow(ctx, `SELECT count(*), sum(deliveries) FROM event_deliveries`).Scan(&rows, &total); err != nil {
		t.Fatal(err)
	}
	if rows != events || total != events*copies {
		t.Fatalf("%d rows with %d deliveries, want %d and %d", rows, total, events, events*copies)
	}
}

// countingDB counts the statements run through it, and fails each with
// err when err is set.
type countingDB struct {
	dedupe.DB
	queries atomic.Int64
	err     error
}

func (c *countingDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c.queries.Add(1)
	if c.err != nil {
		return nil, c.err
	}
	return c.DB.Query(ctx, sql, args...)
}

// TestBatcherLinger: events arriving one after another share one
// statement when the batcher lingers, and each get their own when it does
// not; a lone event waits Linger for company, then goes out alone.
//
// It runs in a synctest bubble, so it depends on no timing: each event is
// sent only when everything the previous one set off has settled (its
// statement committed, or the batcher waiting for company), and time
// passes only when nothing else can happen.
func TestBatcherLinger(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name             string
		givenLinger      time.Duration
		givenEvents      int
		expectStatements int64
		expectWait       time.Duration
	}{
		{name: "Lingers", givenLinger: 2 * time.Second, givenEvents: 4, expectStatements: 1},
		{name: "LoneEventWaitsLinger", givenLinger: 2 * time.Second, givenEvents: 1, expectStatements: 1, expectWait: 2 * time.Second},
		{name: "DoesNot", givenLinger: 0, givenEvents: 4, expectStatements: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			schema := pgtest.New(t)
			synctest.Test(t, func(t *testing.T) {
				// A pool of the bubble's own: connections made inside it
				// must not be used outside.
				pool, err := pgxpool.New(context.Background(), schema.URL)
				if err != nil {
					t.Fatal(err)
				}
				defer pool.Close()
				db := &countingDB{DB: pool}
				b := dedupe.NewBatcher(db, dedupe.BatcherConfig{MaxInFlight: 1, Linger: tc.givenLinger, LingerBelow: 4})
				defer b.Close()
				start := time.Now()
				var wg sync.WaitGroup
				for i := range tc.givenEvents {
					wg.Go(func() {
						if _, err := b.Record(context.Background(), event("s", fmt.Sprintf("evt_%d", i))); err != nil {
							t.Error(err)
						}
					})
					// Without lingering, the event's statement has
					// committed by now and the next finds the batcher idle.
					synctest.Wait()
				}
				wg.Wait()
				if n := db.queries.Load(); n != tc.expectStatements {
					t.Fatalf("%d statements for %d events, want %d", n, tc.givenEvents, tc.expectStatements)
				}
				if waited := time.Since(start); waited != tc.expectWait {
					t.Fatalf("events answered after %s, want %s", waited, tc.expectWait)
				}
			})
			if n := schema.Int(t, `SELECT count(*) FROM events`); n != tc.givenEvents {
				t.Fatalf("%d events stored, want %d", n, tc.givenEvents)
			}
		})
	}
}

func TestBatcherClosed(t *testing.T) {
	t.Parallel()
	schema := pgtest.New(t)
	b := dedupe.NewBatcher(schema.Pool, dedupe.BatcherConfig{})
	b.Close()
	if _, err := b.Record(context.Background(), event("s", "late")); err != dedupe.ErrBatcherClosed {
		t.Fatalf("got %v, want ErrBatcherClosed", err)
	}
}

// TestRepeatOfAnEventCommittedMeanwhile: a repeat whose insert waits for
// a concurrent first delivery of the same event, which commits after the
// repeat's statement took its snapshot, cannot read the event in that
// statement. Its answer must still count from the event's own copies and
// carry its pending hand-off and state, and the stored count must be
// exact.
func TestRepeatOfAnEventCommittedMeanwhile(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	tx, err := b.schema.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var holder int32
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	first, err := dedupe.RecordBatch(ctx, tx, []dedupe.Event{event("src", "a"), event("src", "a")})
	if err != nil || !first[0].Inserted || first[1].Deliveries != 2 {
		t.Fatalf("first delivery: %+v, %v", first, err)
	}
	type outcome struct {
		recs []dedupe.Recorded
		err  error
	}
	done := make(chan outcome, 1)
	go func() {
		recs, err := dedupe.RecordBatch(ctx, b.schema.Pool, []dedupe.Event{event("src", "a"), event("src", "b"), event("src", "a")})
		done <- outcome{recs, err}
	}()
	// Commit once the repeat waits for the first delivery's insert: its
	// snapshot is older than the commit.
	for b.schema.Int(t, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, holder) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	want := []dedupe.Recorded{
		{Deliveries: 3, Pending: true, State: "received"},
		{Inserted: true, Deliveries: 1, Pending: true, State: "received"},
		{Deliveries: 4, Pending: true, State: "received"},
	}
	for i, w := range want {
		if got.recs[i].Inserted != (got.recs[i].RecordXID != 0) {
			t.Errorf("answer %d: inserted %v, by transaction %d", i, got.recs[i].Inserted, got.recs[i].RecordXID)
		}
		got.recs[i].RecordXID, got.recs[i].RecordedWith = 0, 0
		if got.recs[i] != w {
			t.Errorf("answer %d: %+v, want %+v", i, got.recs[i], w)
		}
	}
	if n := b.schema.Int(t, `SELECT deliveries FROM event_deliveries WHERE external_id = 'a'`); n != 4 {
		t.Errorf("stored count %d, want 4", n)
	}
}
