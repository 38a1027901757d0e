package dedupe_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dedupe"
)

// readAll follows the feed from after until a read finds nothing more
// than want events (or the time runs out) and returns the events' ids in
// feed order, with the last page's cursor. Each read is at once, so a
// transaction still running elsewhere in the cluster (the feed waits
// for it) only delays the test.
func readAll(t *testing.T, b *bundle, after dedupe.FeedCursor, f dedupe.FeedFilter, limit, want int) ([]string, dedupe.FeedCursor) {
	t.Helper()
	ctx := testCtx(t)
	var got []string
	deadline := time.Now().Add(20 * time.Second)
	for {
		page, err := b.store.ReadFeed(ctx, dedupe.FeedRequest{After: after, Filter: f, Limit: limit})
		if err != nil {
			t.Fatalf("ReadFeed after %s: %v", after, err)
		}
		if limit > 0 && len(page.Events) > limit {
			t.Fatalf("page of %d events, limit %d", len(page.Events), limit)
		}
		prev := after
		for _, ev := range page.Events {
			if !prev.Less(ev.Cursor) {
				t.Fatalf("event %s at %s does not come after %s", ev.ExternalID, ev.Cursor, prev)
			}
			prev = ev.Cursor
			got = append(got, ev.ExternalID)
		}
		if page.Next.Less(prev) {
			t.Fatalf("next %s comes before the page's last event %s", page.Next, prev)
		}
		after = page.Next
		if len(got) >= want && !page.More {
			return got, after
		}
		if time.Now().After(deadline) {
			t.Fatalf("read %d of %d events within 20s: %v", len(got), want, got)
		}
		if !page.More {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func record(t *testing.T, db dedupe.DB, events ...dedupe.Event) {
	t.Helper()
	if _, err := dedupe.RecordBatch(testCtx(t), db, events); err != nil {
		t.Fatalf("recording %d events: %v", len(events), err)
	}
}

func feedEvent(source, id, typ string) dedupe.Event {
	return dedupe.Event{Source: source, ExternalID: id, EventType: typ, ContentType: "application/json",
		Headers: []byte(`{"X-Test":["` + id + `"]}`), Payload: []byte(`{"id":"` + id + `"}`)}
}

// TestFeedHandsOutEveryEventOnceInOrder: events recorded in batches of
// several sizes, read back in pages of 7 from the start, come each once,
// whole, in the order of their batches, and a read past the end is empty
// with a cursor that does not go back.
func TestFeedHandsOutEveryEventOnceInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	start, err := b.store.FeedHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for batch, size := range []int{1, 5, 30, 2} {
		var evs []dedupe.Event
		for i := range size {
			id := fmt.Sprintf("evt_%d_%02d", batch, i)
			evs = append(evs, feedEvent("src", id, "charge.succeeded"))
			want = append(want, id)
		}
		record(t, b.schema.Pool, evs...)
	}
	got, end := readAll(t, b, start, dedupe.FeedFilter{}, 7, len(want))
	// Within a batch the order is the insert's (by key): compare as sets
	// per batch, and the batches in order.
	if len(got) != len(want) {
		t.Fatalf("read %d events, want %d: %v", len(got), len(want), got)
	}
	for _, bounds := range [][2]int{{0, 1}, {1, 6}, {6, 36}, {36, 38}} {
		g, w := slices.Clone(got[bounds[0]:bounds[1]]), want[bounds[0]:bounds[1]]
		slices.Sort(g)
		if !slices.Equal(g, w) {
			t.Fatalf("events %d..%d = %v, want %v (in any order)", bounds[0], bounds[1], g, w)
		}
	}

	page, err := b.store.ReadFeed(ctx, dedupe.FeedRequest{After: start, Limit: 1})
	if err != nil || len(page.Events) != 1 || !page.More {
		t.Fatalf("first page of 1: %+v, %v; want one event and More", page, err)
	}
	ev := page.Events[0]
	if ev.Source != "src" || ev.ExternalID != "evt_0_00" || ev.EventType != "charge.succeeded" || ev.ContentType != "application/json" ||
		string(ev.Payload) != `{"id":"evt_0_00"}` || string(ev.Headers) != `{"X-Test": ["evt_0_00"]}` || ev.ReceivedAt.IsZero() {
		t.Errorf("event = %+v (headers %s)", ev, ev.Headers)
	}

	again, err := b.store.ReadFeed(ctx, dedupe.FeedRequest{After: end})
	if err != nil || len(again.Events) != 0 || again.Next.Less(end) {
		t.Fatalf("read past the end: %+v, %v; want no event and a cursor not before %s", again, err, end)
	}
	if c, err := dedupe.ParseFeedCursor(end.String()); err != nil || c != end {
		t.Errorf("ParseFeedCursor(%q) = %v, %v", end.String(), c, err)
	}
	for _, bad := range []string{"", "12", "a.b", "1.-1", "1.2.3", " 1.2"} {
		if _, err := dedupe.ParseFeedCursor(bad); !errors.Is(err, dedupe.ErrBadCursor) {
			t.Errorf("ParseFeedCursor(%q) = %v, want ErrBadCursor", bad, err)
		}
	}
}

// TestFeedWaitsForALateCommit: a transaction records event "late" and
// stays open while another records later events and commits. The feed
// hands out none of the later events while "late" may still commit, and
// "late" comes first once it has: a reader never moves past an event
// that commits after it read. Without the horizon the later events come
// first and the cursor passes "late", which is never read.
func TestFeedWaitsForALateCommit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	start, err := b.store.FeedHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := b.schema.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	record(t, tx, feedEvent("src", "late", "t"))
	record(t, b.schema.Pool, feedEvent("src", "early_1", "t"), feedEvent("src", "early_2", "t"))

	// The later events are committed and visible, yet not handed out.
	if n := b.schema.Int(t, `SELECT count(*) FROM events WHERE external_id LIKE 'early_%'`); n != 2 {
		t.Fatalf("%d later events visible, want 2", n)
	}
	cursor := start
	for range 5 {
		page, err := b.store.ReadFeed(ctx, dedupe.FeedRequest{After: cursor})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Events) > 0 {
			t.Fatalf("the feed handed out %s while an older transaction was open", page.Events[0].ExternalID)
		}
		cursor = page.Next
		time.Sleep(10 * time.Millisecond)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := readAll(t, b, cursor, dedupe.FeedFilter{}, 0, 3)
	if len(got) != 3 || got[0] != "late" {
		t.Fatalf("after the late commit the feed gave %v, want late first, then early_1 and early_2", got)
	}
}

// TestFeedFilters: a source and a type glob keep only their events; the
// cursor moves past the others, also when a read examines only events
// the filter drops, so a reader of a quiet source does not read the busy
// ones again.
func TestFeedFilters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	start, err := b.store.FeedHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	record(t, b.schema.Pool,
		feedEvent("stripe", "s1", "invoice.paid"), feedEvent("stripe", "s2", "charge.succeeded"),
		feedEvent("github", "g1", "push"), feedEvent("stripe", "s3", "invoice.created"),
		feedEvent("github", "g2", ""))
	for _, c := range []struct {
		f    dedupe.FeedFilter
		want []string
	}{
		{dedupe.FeedFilter{Source: "stripe"}, []string{"s1", "s2", "s3"}},
		{dedupe.FeedFilter{Type: "invoice.*"}, []string{"s1", "s3"}},
		{dedupe.FeedFilter{Source: "github", Type: "p*"}, []string{"g1"}},
		{dedupe.FeedFilter{Source: "github", Type: "*"}, []string{"g1", "g2"}},
		{dedupe.FeedFilter{Source: "nobody"}, nil},
	} {
		got, end := readAll(t, b, start, c.f, 0, len(c.want))
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("filter %+v: %v, want %v", c.f, got, c.want)
		}
		if !start.Less(end) {
			t.Errorf("filter %+v: the cursor stayed at %s", c.f, end)
		}
		n, complete, err := b.store.FeedBacklog(ctx, start, c.f, 10)
		if err != nil || n != len(c.want) || !complete {
			t.Errorf("filter %+v: backlog %d (complete %v), %v; want %d", c.f, n, complete, err, len(c.want))
		}
	}
	if n, complete, err := b.store.FeedBacklog(ctx, start, dedupe.FeedFilter{}, 3); err != nil || n != 3 || complete {
		t.Errorf("backlog capped at 3: %d (complete %v), %v", n, complete, err)
	}
	if _, err := b.store.ReadFeed(ctx, dedupe.FeedRequest{After: start, Filter: dedupe.FeedFilter{Type: "a[b"}}); err == nil {
		t.Errorf("a type filter that is not a glob was taken")
	}
}

// TestFeedStartsAtATime: FeedSince finds the events recorded from a time
// on (here: the second batch's), and a time after every event gives the
// head: nothing before it.
func TestFeedStartsAtATime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	record(t, b.schema.Pool, feedEvent("src", "old", "t"))
	b.exec(t, `UPDATE events SET received_at = now() - interval '1 hour'`)
	record(t, b.schema.Pool, feedEvent("src", "new_1", "t"), feedEvent("src", "new_2", "t"))
	since, err := b.store.FeedSince(ctx, time.Now().Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := readAll(t, b, since, dedupe.FeedFilter{}, 0, 2)
	slices.Sort(got)
	if !slices.Equal(got, []string{"new_1", "new_2"}) {
		t.Fatalf("from a minute ago: %v, want new_1 and new_2", got)
	}
	later, err := b.store.FeedSince(ctx, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if page, err := b.store.ReadFeed(ctx, dedupe.FeedRequest{After: later}); err != nil || len(page.Events) != 0 {
		t.Fatalf("from an hour ahead: %+v, %v; want nothing", page, err)
	}
}

// TestFeedPageBounds: a page stops at its payload budget (holding at
// least one event, however large) and says there is more.
func TestFeedPageBounds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	start, err := b.store.FeedHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 3000)
	var evs []dedupe.Event
	for i := range 4 {
		ev := feedEvent("src", fmt.Sprintf("big_%d", i), "t")
		ev.Payload = big
		evs = append(evs, ev)
	}
	record(t, b.schema.Pool, evs...)
	var page dedupe.FeedPage
	deadline := time.Now().Add(20 * time.Second)
	for len(page.Events) == 0 && time.Now().Before(deadline) {
		if page, err = b.store.ReadFeed(ctx, dedupe.FeedRequest{After: start, MaxBytes: 1000}); err != nil {
			t.Fatal(err)
		}
	}
	if len(page.Events) != 1 || !page.More {
		t.Fatalf("page under a 1000-byte budget: %d events, more %v; want 1 and more", len(page.Events), page.More)
	}
	page, err = b.store.ReadFeed(ctx, dedupe.FeedRequest{After: start, MaxBytes: 7000})
	if err != nil || len(page.Events) != 2 || !page.More {
		t.Fatalf("page under a 7000-byte budget: %d events, more %v, %v; want 2 and more", len(page.Events), page.More, err)
	}
}
