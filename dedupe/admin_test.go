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

// insertRun adds a job_runs row in a given state: failed is a refusal
// (permanent), shown failed.
func (b *bundle) insertRun(t *testing.T, id, dest string, gen int, status string) {
	t.Helper()
	b.insertRunAs(t, id, run{dest: dest, gen: gen, status: status, attempts: 1, permanent: status == "failed"})
}

// run is a job_runs row to insert: status, and what else decides its
// shown status.
type run struct {
	dest      string
	gen       int
	status    string
	attempts  int
	permanent bool
	held      bool
}

// insertRunAs adds r for event id.
func (b *bundle) insertRunAs(t *testing.T, id string, r run) {
	t.Helper()
	key := fmt.Sprintf("src:%s:%s", r.dest, id)
	if r.gen > 1 {
		key += fmt.Sprintf("#%d", r.gen)
	}
	b.exec(t, `INSERT INTO job_runs (key, source, external_id, destination, generation, status, max_attempts, attempts, permanent,
                      held_until, hold_reason, retry_at)
VALUES ($1, 'src', $2, $3, $4, $5, 5, $6, $7,
        CASE WHEN $8 THEN now() + interval '1 minute' END, CASE WHEN $8 THEN 'destination asked to wait (HTTP 429)' END,
        CASE WHEN $5 = 'failed' AND NOT $7 OR $8 THEN now() + interval '1 minute' END)`,
		key, id, r.dest, r.gen, r.status, r.attempts, r.permanent, r.held)
}

// TestEventStates checks the one state rule (dedupe/state.go) where its
// readers meet it: the admin listing, the count, the detail and the
// answer to a repeat delivery report the same state, the expected one,
// computed over the event's plan, never over the configuration: a
// destination outside the plan (added later) leaves the event done.
func TestEventStates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	ab := []string{"a", "b"}
	cases := []struct {
		id      string
		pending bool
		plan    []string // nil: recorded before plans were kept
		runs    []run
		want    string
	}{
		// Recorded without a plan, its hand-off pending.
		{id: "e-received", pending: true, want: "received"},
		// Planned, no destination started yet: queued, whatever the
		// outbox says.
		{id: "e-waiting", pending: true, plan: ab, want: "queued"},
		{id: "e-queued", plan: ab, want: "queued"},
		{id: "e-half", plan: ab, runs: []run{{dest: "a", gen: 1, status: "done"}}, want: "queued"},
		{id: "e-done", plan: ab, runs: []run{{dest: "a", gen: 1, status: "done"}, {dest: "b", gen: 1, status: "done"}}, want: "done"},
		{id: "e-failed", plan: ab, runs: []run{{dest: "a", gen: 1, status: "failed", attempts: 1, permanent: true}, {dest: "b", gen: 1, status: "done"}}, want: "failed"},
		{id: "e-retrying", plan: ab, runs: []run{{dest: "a", gen: 1, status: "failed", attempts: 2}, {dest: "b", gen: 1, status: "running"}}, want: "retrying"},
		{id: "e-held", plan: ab, runs: []run{{dest: "a", gen: 1, status: "running", held: true}, {dest: "b", gen: 1, status: "running"}}, want: "held"},
		// A replay waiting for a worker: no failed attempt in its budget.
		{id: "e-replayed", plan: ab, runs: []run{{dest: "a", gen: 2, status: "failed"}, {dest: "a", gen: 1, status: "done"}, {dest: "b", gen: 1, status: "done"}}, want: "queued"},
		{id: "e-dead", plan: ab, runs: []run{{dest: "a", gen: 1, status: "dead", attempts: 5}, {dest: "b", gen: 1, status: "failed", attempts: 1}}, want: "dead"},
		{id: "e-running", plan: ab, runs: []run{{dest: "a", gen: 1, status: "running"}, {dest: "b", gen: 1, status: "done"}}, want: "running"},
		{id: "e-stale", plan: ab, runs: []run{{dest: "a", gen: 1, status: "skipped_stale"}, {dest: "b", gen: 1, status: "skipped_stale"}}, want: "skipped_stale"},
		{id: "e-stale-done", plan: ab, runs: []run{{dest: "a", gen: 1, status: "skipped_stale"}, {dest: "b", gen: 1, status: "done"}}, want: "done"},
		{id: "e-filtered", plan: ab, runs: []run{{dest: "a", gen: 1, status: "filtered"}, {dest: "b", gen: 1, status: "done"}}, want: "done"},
		// A forced replay that succeeded supersedes the failed generation.
		{id: "e-forced", plan: ab, runs: []run{{dest: "a", gen: 1, status: "failed", attempts: 1, permanent: true}, {dest: "a", gen: 2, status: "done"}, {dest: "b", gen: 1, status: "done"}}, want: "done"},
		// No destination wanted it: done once handed off.
		{id: "e-unwanted", plan: []string{}, want: "done"},
		// Planned for a alone: b (added to the configuration later, or
		// filtering it out) does not make it wait.
		{id: "e-only-a", plan: []string{"a"}, runs: []run{{dest: "a", gen: 1, status: "done"}}, want: "done"},
		// Recorded before plans were kept: its runs are its plan.
		{id: "e-legacy", runs: []run{{dest: "a", gen: 1, status: "done"}}, want: "done"},
	}
	for _, c := range cases {
		if _, err := dedupe.RecordBatch(ctx, b.schema.Pool, []dedupe.Event{{Source: "src", ExternalID: c.id, Payload: []byte(`{}`), Plan: c.plan}}); err != nil {
			t.Fatal(err)
		}
		if !c.pending {
			if err := b.store.SettleEvents(ctx, []dedupe.EventRef{{Source: "src", ExternalID: c.id}}); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range c.runs {
			b.insertRunAs(t, c.id, r)
		}
	}
	page, err := b.store.ListEvents(ctx, dedupe.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != len(cases) {
		t.Fatalf("listed %d events, want %d", len(page.Events), len(cases))
	}
	listed := map[string]string{}
	for _, e := range page.Events {
		listed[e.ExternalID] = e.State
	}
	for _, c := range cases {
		if listed[c.id] != c.want {
			t.Errorf("%s: listed in state %q, want %q", c.id, listed[c.id], c.want)
		}
		rec, err := dedupe.RecordBatch(ctx, b.schema.Pool, []dedupe.Event{{
			Source: "src", ExternalID: c.id, Payload: []byte(`{}`), Plan: ab,
		}})
		if err != nil {
			t.Fatal(err)
		}
		if rec[0].Inserted || rec[0].State != c.want {
			t.Errorf("%s: a repeat delivery reports state %q (inserted %v), want %q", c.id, rec[0].State, rec[0].Inserted, c.want)
		}
		if d, err := b.store.GetEvent(ctx, "src", c.id, dedupe.DestinationView{}); err != nil || d.State != c.want {
			t.Errorf("%s: detail state %q (%v), want %q", c.id, d.State, err, c.want)
		}
		n, err := b.store.CountEvents(ctx, dedupe.EventFilter{State: c.want})
		if err != nil || n.Matched < 1 || !n.Complete {
			t.Errorf("%s: count with state %s = %+v, %v", c.id, c.want, n, err)
		}
	}
	failed, err := b.store.ListEvents(ctx, dedupe.EventFilter{State: "failed"})
	if err != nil {
		t.Fatal(err)
	}
	if len(failed.Events) != 1 || failed.Events[0].ExternalID != "e-failed" {
		t.Errorf("state=failed listed %+v", failed.Events)
	}

	// A paused destination holds what would be queued or retrying: the
	// listing, the detail and a run status filter say held, with why.
	held := []dedupe.HeldDestination{{Source: "src", Destination: "a", Reason: "paused"}}
	for id, want := range map[string]string{"e-retrying": "held", "e-queued": "held", "e-replayed": "held", "e-running": "running", "e-failed": "failed"} {
		page, err := b.store.ListEvents(ctx, dedupe.EventFilter{IDPrefix: id, View: dedupe.DestinationView{Held: held}})
		if err != nil || len(page.Events) != 1 || page.Events[0].State != want {
			t.Errorf("%s with a paused: %+v (%v), want state %s", id, page.Events, err, want)
		}
	}
	d, err := b.store.GetEvent(ctx, "src", "e-retrying", dedupe.DestinationView{Held: held})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range d.Runs {
		if r.Destination == "a" && (r.Shown != "held" || r.HoldReason != "paused" || r.HoldUntil != nil) {
			t.Errorf("run of a paused destination: %+v, want held (paused, until resumed)", r)
		}
	}
	if d, err := b.store.GetEvent(ctx, "src", "e-held", dedupe.DestinationView{}); err != nil || d.Runs[0].Shown != "held" ||
		d.Runs[0].HoldReason != "destination asked to wait (HTTP 429)" || d.Runs[0].HoldUntil == nil {
		t.Errorf("a run the destination held: %+v (%v)", d.Runs, err)
	}
	if d, err := b.store.GetEvent(ctx, "src", "e-half", dedupe.DestinationView{}); err != nil || len(d.Waiting) != 1 || d.Waiting[0].Destination != "b" ||
		d.Waiting[0].Shown != "queued" {
		t.Errorf("e-half's waiting destinations: %+v (%v), want b queued", d.Waiting, err)
	}
	if d, err := b.store.GetEvent(ctx, "src", "e-queued", dedupe.DestinationView{Held: held}); err != nil || len(d.Waiting) != 2 || d.Waiting[0].Shown != "held" ||
		d.Waiting[0].HoldReason != "paused" || d.Waiting[1].Shown != "queued" {
		t.Errorf("e-queued's waiting destinations with a paused: %+v (%v), want a held (paused), b queued", d.Waiting, err)
	}
	byStatus, err := b.store.ListEvents(ctx, dedupe.EventFilter{Status: "held", RunDestination: "a", View: dedupe.DestinationView{Held: held}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range byStatus.Events {
		ids = append(ids, e.ExternalID)
	}
	slices.Sort(ids)
	// e-waiting's a is planned, not started, and held by the pause too.
	if want := []string{"e-held", "e-queued", "e-replayed", "e-retrying", "e-waiting"}; !slices.Equal(ids, want) {
		t.Errorf("events with a's run held: %v, want %v", ids, want)
	}

	// b removed by a reload: its runs that would be queued wait for it to
	// be configured again, held and saying so; a run of a configured
	// destination, or one settled, shows as it is.
	onlyA := dedupe.DestinationView{Configured: []dedupe.Route{{Source: "src", Destination: "a"}}}
	for id, want := range map[string]string{"e-half": "held", "e-queued": "held", "e-failed": "failed", "e-done": "done"} {
		page, err := b.store.ListEvents(ctx, dedupe.EventFilter{IDPrefix: id, View: onlyA})
		if err != nil || len(page.Events) != 1 || page.Events[0].State != want {
			t.Errorf("%s with b removed: %+v (%v), want state %s", id, page.Events, err, want)
		}
	}
	if d, err := b.store.GetEvent(ctx, "src", "e-half", onlyA); err != nil || len(d.Waiting) != 1 || d.Waiting[0].Shown != "held" ||
		d.Waiting[0].HoldReason != dedupe.HoldNotConfigured || d.State != "held" {
		t.Errorf("e-half with b removed: %s %+v (%v), want b held (%s)", d.State, d.Waiting, err, dedupe.HoldNotConfigured)
	}
}

func TestListEventsPagesNewestFirst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	all := ids("p", 25)
	for _, id := range all {
		b.recordEvent(t, id)
	}
	// Same received_at for several rows exercises the keyset tie-breakers.
	b.exec(t, `UPDATE events SET received_at = now() - interval '1 hour' WHERE external_id < 'p010'`)
	var seen []string
	cursor := ""
	for range 10 {
		page, err := b.store.ListEvents(ctx, dedupe.EventFilter{Limit: 7, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range page.Events {
			if i > 0 && e.ReceivedAt.After(page.Events[i-1].ReceivedAt) {
				t.Errorf("page not newest first at %s", e.ExternalID)
			}
			seen = append(seen, e.ExternalID)
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	slices.Sort(seen)
	if !slices.Equal(seen, all) {
		t.Fatalf("paging saw %d events (%v), want each of %d once", len(seen), seen, len(all))
	}
	n, err := b.store.CountEvents(ctx, dedupe.EventFilter{Until: time.Now().Add(-30 * time.Minute)})
	if err != nil || n != (dedupe.EventCount{Matched: 10, Complete: true}) {
		t.Errorf("count until 30m ago = %+v, %v; want 10, complete", n, err)
	}
	if _, err := b.store.ListEvents(ctx, dedupe.EventFilter{Cursor: "not a cursor!"}); !errors.Is(err, dedupe.ErrBadCursor) {
		t.Errorf("bad cursor: %v, want ErrBadCursor", err)
	}
}

func TestGetEventRunsAndAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	b.recordEvent(t, "g1")
	c := mustClaim(t, b, claimReq("g1", 3, time.Minute), dedupe.Claimed)
	mustFinish(t, b, "src:dst:g1", dedupe.Finish{Outcome: dedupe.OutcomePermanent, Call: c.Call, Called: true, StatusCode: 400, Error: "destination refused: HTTP 400"})

	d, err := b.store.GetEvent(ctx, "src", "g1", dedupe.DestinationView{})
	if err != nil {
		t.Fatal(err)
	}
	if d.State != dedupe.StatusFailed || len(d.Runs) != 1 || d.Runs[0].Status != "failed" || !d.Runs[0].Permanent {
		t.Fatalf("detail: state %s runs %+v", d.State, d.Runs)
	}
	if len(d.Attempts) != 1 || d.Attempts[0].StatusCode != 400 || d.Attempts[0].Succeeded {
		t.Fatalf("attempts %+v", d.Attempts)
	}
	if string(d.Payload) != `{"id":"g1"}` {
		t.Errorf("payload %q", d.Payload)
	}
	if _, err := b.store.GetEvent(ctx, "src", "nope", dedupe.DestinationView{}); !errors.Is(err, dedupe.ErrNotFound) {
		t.Errorf("missing event: %v, want ErrNotFound", err)
	}
}

func TestReopenRunLetsTheClaimTakeItAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	b.recordEvent(t, "r1")
	c := mustClaim(t, b, claimReq("r1", 1, time.Minute), dedupe.Claimed)
	if f := mustFinish(t, b, "src:dst:r1", dedupe.Finish{Outcome: dedupe.OutcomeRetry, Call: c.Call, Called: true, StatusCode: 500}); f.Status != dedupe.StatusDead {
		t.Fatalf("status %s, want dead", f.Status)
	}
	mustClaim(t, b, claimReq("r1", 1, time.Minute), dedupe.Ended)

	run, ok, err := b.store.ReopenRun(ctx, "src:dst:r1", "alice", "incident 42")
	if err != nil || !ok {
		t.Fatalf("reopen: %v %v", ok, err)
	}
	if run.Status != "failed" || run.Attempts != 0 || run.ReplayedBy != "alice" || run.ReplayReason != "incident 42" {
		t.Fatalf("reopened run %+v", run)
	}
	c2 := mustClaim(t, b, claimReq("r1", 1, time.Minute), dedupe.Claimed)
	if c2.Call != 2 {
		t.Errorf("call %d, want 2 (calls keep counting)", c2.Call)
	}
	// Running: a reopen changes nothing.
	if cur, ok, err := b.store.ReopenRun(ctx, "src:dst:r1", "bob", ""); err != nil || ok || cur.Status != "running" {
		t.Errorf("reopen of a running run: %v %v %+v", ok, err, cur)
	}
	if _, _, err := b.store.ReopenRun(ctx, "src:dst:none", "bob", ""); !errors.Is(err, dedupe.ErrNotFound) {
		t.Errorf("reopen of a missing run: %v", err)
	}
}

func TestNewGenerationNumbersAndRecords(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	b.recordEvent(t, "n1")
	b.insertRun(t, "n1", "dst", 1, "done")
	key := func(g int) string { return fmt.Sprintf("src:dst:n1#%d", g) }
	for want := 2; want <= 3; want++ {
		run, err := b.store.NewGeneration(ctx, dedupe.NewGeneration{
			Source: "src", ExternalID: "n1", Destination: "dst", MaxAttempts: 4, By: "carol", Reason: "resend", KeyFunc: key,
		})
		if err != nil {
			t.Fatal(err)
		}
		if run.Generation != want || run.Key != key(want) || run.Status != "failed" || run.ReplayedBy != "carol" {
			t.Fatalf("generation run %+v, want generation %d", run, want)
		}
		mustClaim(t, b, dedupe.ClaimRequest{Key: run.Key, Source: "src", ExternalID: "n1", Destination: "dst",
			Generation: want, MaxAttempts: 4, Lease: time.Minute}, dedupe.Claimed)
	}
	_, err := b.store.NewGeneration(ctx, dedupe.NewGeneration{Source: "src", ExternalID: "missing", Destination: "dst", KeyFunc: key})
	if !errors.Is(err, dedupe.ErrNotFound) {
		t.Errorf("forced replay of a missing event: %v, want ErrNotFound", err)
	}
}

func TestImportEventsIsIdempotent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	b.recordEvent(t, "live")
	evs := []dedupe.ImportedEvent{
		{Event: dedupe.Event{Source: "src", ExternalID: "live", Payload: []byte(`{"x":1}`)}},
		{Event: dedupe.Event{Source: "src", ExternalID: "i1", Payload: []byte(`{"x":2}`)}},
		{Event: dedupe.Event{Source: "src", ExternalID: "i1", Payload: []byte(`{"x":2}`)}},
	}
	got, err := b.store.ImportEvents(ctx, evs, dedupe.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []bool{false, true, false}) {
		t.Fatalf("inserted %v", got)
	}
	for _, opts := range []dedupe.ImportOptions{{}, {RecordOnly: true}} {
		again, err := b.store.ImportEvents(ctx, evs, opts)
		if err != nil || slices.Contains(again, true) {
			t.Fatalf("rerun (%+v) inserted %v, %v", opts, again, err)
		}
	}
	if n := b.schema.Int(t, `SELECT deliveries FROM event_deliveries WHERE external_id = 'live'`); n != 1 {
		t.Errorf("an import changed a live event's deliveries to %d", n)
	}
	if n := b.schema.Int(t, `SELECT count(*) FROM event_outbox WHERE external_id = 'i1'`); n != 1 {
		t.Errorf("imported event is not pending for the relay")
	}
	if n := b.schema.Int(t, `SELECT count(*) FROM events WHERE recorded_only`); n != 0 {
		t.Errorf("a record-only rerun marked %d stored events recorded only", n)
	}
}

// TestImportRecordOnly: events imported as delivered elsewhere keep the
// provider's time, are in no outbox (so recovery never sees them), report
// state recorded_only in the listing, the detail and the answer to a live
// delivery of the same id, which is a duplicate that hands nothing off.
func TestImportRecordOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	at := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	evs := []dedupe.ImportedEvent{
		{Event: dedupe.Event{Source: "src", ExternalID: "r1", Payload: []byte(`{"id":"r1"}`)}, ReceivedAt: at},
		{Event: dedupe.Event{Source: "src", ExternalID: "r2", Payload: []byte(`{"id":"r2"}`)}},
	}
	got, err := b.store.ImportEvents(ctx, evs, dedupe.ImportOptions{RecordOnly: true})
	if err != nil || !slices.Equal(got, []bool{true, true}) {
		t.Fatalf("inserted %v, %v", got, err)
	}
	if n := b.schema.Int(t, `SELECT count(*) FROM event_outbox`); n != 0 {
		t.Errorf("%d outbox rows for recorded-only events", n)
	}
	if pending, _, err := b.store.OutboxPage(ctx, dedupe.OutboxCursor{}, 0, 100); err != nil || len(pending) != 0 {
		t.Errorf("recovery sees %v (%v)", pending, err)
	}
	d, err := b.store.GetEvent(ctx, "src", "r1", dedupe.DestinationView{})
	if err != nil {
		t.Fatal(err)
	}
	if d.State != dedupe.StateRecordedOnly || !d.RecordedOnly || !d.ReceivedAt.Equal(at) || !d.LastReceivedAt.Equal(at) {
		t.Errorf("detail: state %q, recorded only %v, received %s (last %s); want recorded_only at %s", d.State, d.RecordedOnly, d.ReceivedAt, d.LastReceivedAt, at)
	}
	page, err := b.store.ListEvents(ctx, dedupe.EventFilter{State: dedupe.StateRecordedOnly})
	if err != nil || len(page.Events) != 2 {
		t.Fatalf("listing by state recorded_only: %+v, %v", page, err)
	}
	if page.Events[0].ExternalID != "r2" || page.Events[1].ExternalID != "r1" {
		t.Errorf("listing order %s, %s; want r2 (now) before r1 (2024)", page.Events[0].ExternalID, page.Events[1].ExternalID)
	}

	res, err := dedupe.RecordBatch(ctx, b.schema.Pool, []dedupe.Event{{Source: "src", ExternalID: "r1", Payload: []byte(`{"id":"r1"}`), Plan: []string{"dst", "other"}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := res[0]; r.Inserted || r.Pending || r.Deliveries != 2 || r.State != dedupe.StateRecordedOnly {
		t.Errorf("live delivery of a recorded-only event: %+v, want a duplicate, not pending, recorded_only", r)
	}
	if n := b.schema.Int(t, `SELECT count(*) FROM event_outbox`); n != 0 {
		t.Errorf("the live delivery put %d events in the outbox", n)
	}

	// Replayed to one of two destinations: its state comes from that run
	// alone; the other destination is not waiting.
	mustClaim(t, b, dedupe.ClaimRequest{Key: "src:dst:r1", Source: "src", ExternalID: "r1", Destination: "dst",
		Generation: 1, MaxAttempts: 4, Lease: time.Minute}, dedupe.Claimed)
	if d, err := b.store.GetEvent(ctx, "src", "r1", dedupe.DestinationView{}); err != nil || d.State != dedupe.StatusRunning {
		t.Errorf("replayed recorded-only event: state %q (%v), want running", d.State, err)
	}
}

// TestAdminStatementsHaveATimeout: an admin read or replay that cannot
// finish (here: a lock held elsewhere) gives up after
// AdminStatementTimeout with ErrTooSlow instead of holding a connection
// as long as it waits.
func TestAdminStatementsHaveATimeout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.recordEvent(t, "locked")
	ctx := testCtx(t)
	tx, err := b.schema.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `LOCK TABLE events IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	calls := map[string]func(context.Context) error{
		"list": func(ctx context.Context) error {
			_, err := b.store.ListEvents(ctx, dedupe.EventFilter{})
			return err
		},
		"get": func(ctx context.Context) error {
			_, err := b.store.GetEvent(ctx, "src", "locked", dedupe.DestinationView{})
			return err
		},
		"force": func(ctx context.Context) error {
			_, err := b.store.NewGeneration(ctx, dedupe.NewGeneration{Source: "src", ExternalID: "locked", Destination: "dst",
				KeyFunc: func(int) string { return "src:dst:locked#2" }})
			return err
		},
	}
	errs := make(chan string, len(calls))
	for name, call := range calls {
		go func() {
			callCtx, cancel := context.WithTimeout(ctx, dedupe.AdminStatementTimeout+3*time.Second)
			defer cancel()
			start := time.Now()
			err := call(callCtx)
			if !errors.Is(err, dedupe.ErrTooSlow) {
				errs <- fmt.Sprintf("%s: %v after %s, want ErrTooSlow after %s", name, err, time.Since(start).Round(time.Millisecond), dedupe.AdminStatementTimeout)
				return
			}
			errs <- ""
		}()
	}
	for range calls {
		if msg := <-errs; msg != "" {
			t.Error(msg)
		}
	}
}

// TestListEventsByStateWalksEveryMatch: a state-filtered page examines a
// bounded stretch of events and may end early (even empty) with a cursor;
// following the cursors visits every match exactly once.
func TestListEventsByStateWalksEveryMatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	b.exec(t, `INSERT INTO events (source, external_id, payload, received_at)
        SELECT 'src', 'e' || lpad(g::text, 4, '0'), '{}', now() - g * interval '1 second' FROM generate_series(1, 1500) g`)
	b.exec(t, `DELETE FROM event_outbox`)
	b.exec(t, `INSERT INTO job_runs (key, source, external_id, destination, status, max_attempts)
        SELECT 'src:dst:' || external_id, 'src', external_id, 'dst', CASE WHEN external_id LIKE '%17' THEN 'dead' ELSE 'done' END, 5
        FROM events`)
	var seen []string
	pages, cursor := 0, ""
	for ; pages < 100; pages++ {
		page, err := b.store.ListEvents(ctx, dedupe.EventFilter{State: "dead", Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Events {
			seen = append(seen, e.ExternalID)
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	var want []string
	for i := 17; i <= 1500; i += 100 {
		want = append(want, fmt.Sprintf("e%04d", i))
	}
	slices.Sort(seen)
	if !slices.Equal(seen, want) {
		t.Fatalf("walked %d pages and saw %v, want the dead events %v once each", pages, seen, want)
	}
	if pages < 15 {
		t.Errorf("%d pages: a page of 2 should examine at most 60 events", pages)
	}
}
