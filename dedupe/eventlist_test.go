package dedupe_test

import (
	"slices"
	"testing"

	"github.com/webhookd/webhookd/dedupe"
)

// TestListEventsFilters: each filter narrows the listing to the events it
// names, and together they narrow further, on real rows; the count agrees
// with the listing.
func TestListEventsFilters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	types := map[string]string{
		"ord_1": "invoice.paid", "ord_10": "invoice.payment_failed", "ord_2": "orders/create", "ORD_3": "orders/create/extra",
		"pay_1": "charge.succeeded", "x%_1": "invoice", "xyz_1": "",
	}
	for id, typ := range types {
		b.recordEvent(t, id)
		if typ != "" {
			b.exec(t, `UPDATE events SET event_type = $1 WHERE external_id = $2`, typ, id)
		}
	}
	b.exec(t, `INSERT INTO events (source, external_id, payload, event_type) VALUES ('other', 'ord_1', '{}', 'invoice.paid')`)
	b.insertRun(t, "ord_1", "a", 1, "failed")
	b.insertRun(t, "ord_1", "a", 2, "done") // the latest run of a: done
	b.insertRun(t, "ord_1", "b", 1, "failed")
	b.insertRun(t, "ord_10", "a", 1, "dead")
	b.insertRun(t, "pay_1", "a", 1, "failed")

	for _, c := range []struct {
		name string
		f    dedupe.EventFilter
		want []string
	}{
		{"no filter", dedupe.EventFilter{}, []string{"ORD_3", "ord_1", "ord_1", "ord_10", "ord_2", "pay_1", "x%_1", "xyz_1"}},
		{"id prefix", dedupe.EventFilter{IDPrefix: "ord_1"}, []string{"ord_1", "ord_1", "ord_10"}},
		{"exact id", dedupe.EventFilter{IDPrefix: "ord_10"}, []string{"ord_10"}},
		{"id is case-sensitive", dedupe.EventFilter{IDPrefix: "ORD"}, []string{"ORD_3"}},
		{"wildcards in an id are themselves", dedupe.EventFilter{IDPrefix: "x%"}, []string{"x%_1"}},
		{"underscore in an id is itself", dedupe.EventFilter{IDPrefix: "ord__"}, nil},
		{"type glob", dedupe.EventFilter{Type: "invoice.*"}, []string{"ord_1", "ord_1", "ord_10"}},
		{"type glob over slashes", dedupe.EventFilter{Type: "orders/*"}, []string{"ORD_3", "ord_2"}},
		{"type is matched whole", dedupe.EventFilter{Type: "invoice"}, []string{"x%_1"}},
		{"type exact", dedupe.EventFilter{Type: "orders/create"}, []string{"ord_2"}},
		{"source", dedupe.EventFilter{Source: "other"}, []string{"ord_1"}},
		{"sources of a destination", dedupe.EventFilter{Sources: []string{"other"}}, []string{"ord_1"}},
		{"a destination no source has", dedupe.EventFilter{Sources: []string{}}, nil},
		{"run status: latest runs only", dedupe.EventFilter{Status: "failed"}, []string{"ord_1", "pay_1"}},
		{"run status of one destination", dedupe.EventFilter{Status: "failed", RunDestination: "a"}, []string{"pay_1"}},
		{"run status of one destination, replayed", dedupe.EventFilter{Status: "done", RunDestination: "a"}, []string{"ord_1"}},
		{"id prefix and run status", dedupe.EventFilter{IDPrefix: "ord_", Status: "dead"}, []string{"ord_10"}},
		{"id prefix and type", dedupe.EventFilter{IDPrefix: "ord_", Type: "orders/*"}, []string{"ord_2"}},
		{"source, id prefix and type", dedupe.EventFilter{Source: "src", IDPrefix: "ord_1", Type: "invoice.*"}, []string{"ord_1", "ord_10"}},
		{"state and id prefix", dedupe.EventFilter{State: "failed", IDPrefix: "ord"}, []string{"ord_1"}},
	} {
		page, err := b.store.ListEvents(ctx, c.f)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var got []string
		for _, e := range page.Events {
			got = append(got, e.ExternalID)
			if e.EventType != types[e.ExternalID] && e.Source == "src" {
				t.Errorf("%s: %s listed with type %q, want %q", c.name, e.ExternalID, e.EventType, types[e.ExternalID])
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: listed %q, want %q", c.name, got, c.want)
		}
		n, err := b.store.CountEvents(ctx, c.f)
		if err != nil || n.Matched != int64(len(c.want)) || !n.Complete {
			t.Errorf("%s: count %+v (%v), want %d, complete", c.name, n, err, len(c.want))
		}
	}
}

// TestListEventsPagesBothWays: older pages, then newer pages back from
// the end, see every event once each way, in newest-first order on every
// page.
func TestListEventsPagesBothWays(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	all := ids("w", 17)
	for _, id := range all {
		b.recordEvent(t, id)
	}
	b.exec(t, `UPDATE events SET received_at = now() - interval '1 hour' WHERE external_id < 'w008'`)
	walk := func(cursor string, older bool) ([][]string, string) {
		var pages [][]string
		var back string
		for range 10 {
			page, err := b.store.ListEvents(ctx, dedupe.EventFilter{Limit: 5, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for i, e := range page.Events {
				if i > 0 && e.ReceivedAt.After(page.Events[i-1].ReceivedAt) {
					t.Errorf("page not newest first at %s", e.ExternalID)
				}
				got = append(got, e.ExternalID)
			}
			pages = append(pages, got)
			cursor = page.Prev
			back = page.Next
			if older {
				cursor, back = page.Next, page.Prev
			}
			if cursor == "" {
				break
			}
		}
		return pages, back
	}
	olderPages, back := walk("", true)
	if len(olderPages) != 4 || back == "" {
		t.Fatalf("older pages %q, back cursor %q", olderPages, back)
	}
	// From the last page's newer cursor back to the first page.
	newerPages, _ := walk(back, false)
	var seen []string
	for _, p := range newerPages {
		seen = append(seen, p...)
	}
	seen = append(seen, olderPages[len(olderPages)-1]...)
	slices.Sort(seen)
	if !slices.Equal(seen, all) {
		t.Fatalf("walking back saw %q, want each of %q once", seen, all)
	}
	if len(newerPages) == 0 || len(newerPages[len(newerPages)-1]) == 0 || newerPages[len(newerPages)-1][0] != olderPages[0][0] {
		t.Errorf("walking back ended at %q, want the first page %q", newerPages, olderPages[0])
	}
}
