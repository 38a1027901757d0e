package dedupe_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dedupe"
)

// TestIssueFailuresRaceIntoOneIssue: 40 failures of one group recorded
// at once (8 at a time, on separate connections) open one issue whose
// count is 40 and whose events are the 20 distinct events; another
// cause opens its own; a failure breaks the other cause's run of
// successes; close_after successes in a row close both.
func TestIssueFailuresRaceIntoOneIssue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		opened int
		ids    = map[int64]bool{}
		start  = make(chan struct{})
	)
	for i := range 40 {
		wg.Go(func() {
			<-start
			r, err := b.store.RecordIssueFailure(ctx, dedupe.IssueFailure{Source: "src", Destination: "dst", Cause: "500", ExternalIDs: []string{fmt.Sprintf("evt_%02d", i%20)}})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			ids[r.ID] = true
			if r.Opened {
				opened++
			}
		})
	}
	close(start)
	wg.Wait()
	if opened != 1 || len(ids) != 1 {
		t.Fatalf("%d opened, %d issue ids; want one issue", opened, len(ids))
	}
	var id int64
	for k := range ids {
		id = k
	}
	issue, err := b.store.GetIssue(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if issue.Count != 40 || issue.EventCount != 20 || len(issue.Events) != 20 || issue.State != dedupe.IssueOpen {
		t.Fatalf("issue = %+v", issue)
	}
	timeout, err := b.store.RecordIssueFailure(ctx, dedupe.IssueFailure{Source: "src", Destination: "dst", Cause: "timeout", ExternalIDs: []string{"evt_t"}})
	if err != nil || !timeout.Opened || timeout.ID == id {
		t.Fatalf("timeout issue: %+v %v", timeout, err)
	}
	open, err := b.store.OpenIssueDestinations(ctx)
	if err != nil || len(open) != 1 || open[0] != (dedupe.IssueDestination{Source: "src", Destination: "dst"}) {
		t.Fatalf("open destinations %v %v", open, err)
	}

	const closeAfter = 3
	success := func() dedupe.IssueSuccess {
		t.Helper()
		s, err := b.store.RecordIssueSuccess(ctx, "src", "dst", closeAfter)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	success()
	success()
	// A failure of the other cause breaks the run for both issues.
	if _, err := b.store.RecordIssueFailure(ctx, dedupe.IssueFailure{Source: "src", Destination: "dst", Cause: "timeout", ExternalIDs: []string{"evt_t"}}); err != nil {
		t.Fatal(err)
	}
	success()
	success()
	if s := success(); s.Open || len(s.Closed) != 2 {
		t.Fatalf("third success in a row: %+v, want both issues closed", s)
	}
	if s := success(); s.Open || len(s.Closed) != 0 {
		t.Fatalf("after closing: %+v", s)
	}
	issue, _ = b.store.GetIssue(ctx, id)
	if issue.State != dedupe.IssueClosed || issue.EndedAt == nil {
		t.Fatalf("issue = %+v", issue)
	}
	// The next failure opens a new issue: the closed one stays closed.
	again, err := b.store.RecordIssueFailure(ctx, dedupe.IssueFailure{Source: "src", Destination: "dst", Cause: "500", ExternalIDs: []string{"evt_00"}})
	if err != nil || !again.Opened || again.ID == id {
		t.Fatalf("after close: %+v %v", again, err)
	}
}

// TestIssueNoticesClaimedOnce: two claimers at once get each message
// once: the opening, then (after renotify) one reminder, then the close;
// an issue that ended before its opening was announced is announced by
// neither.
func TestIssueNoticesClaimedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	r, err := b.store.RecordIssueFailure(ctx, dedupe.IssueFailure{Source: "src", Destination: "dst", Cause: "500", ExternalIDs: []string{"evt_1"}})
	if err != nil {
		t.Fatal(err)
	}
	claimBoth := func(renotify time.Duration) []dedupe.IssueNotice {
		t.Helper()
		var (
			wg  sync.WaitGroup
			mu  sync.Mutex
			out []dedupe.IssueNotice
		)
		for range 2 {
			wg.Go(func() {
				n, err := b.store.ClaimIssueNotices(ctx, renotify, 100)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				out = append(out, n...)
				mu.Unlock()
			})
		}
		wg.Wait()
		return out
	}
	if n := claimBoth(time.Hour); len(n) != 1 || n[0].Type != dedupe.NoticeOpened || n[0].Issue.ID != r.ID || n[0].Issue.Count != 1 {
		t.Fatalf("first claims: %+v", n)
	}
	if n := claimBoth(time.Hour); len(n) != 0 {
		t.Fatalf("claimed again: %+v", n)
	}
	time.Sleep(1100 * time.Millisecond)
	if n := claimBoth(time.Second); len(n) != 1 || n[0].Type != dedupe.NoticeReminder {
		t.Fatalf("reminder claims: %+v", n)
	}
	if n := claimBoth(time.Second); len(n) != 0 {
		t.Fatalf("a second reminder within renotify: %+v", n)
	}
	if _, err := b.store.ResolveIssue(ctx, r.ID, "ana", "fixed"); err != nil {
		t.Fatal(err)
	}
	if n := claimBoth(time.Hour); len(n) != 1 || n[0].Type != dedupe.NoticeClosed || n[0].Issue.State != dedupe.IssueResolved || n[0].Issue.ResolvedBy != "ana" {
		t.Fatalf("close claims: %+v", n)
	}
	if _, err := b.store.ResolveIssue(ctx, r.ID, "bob", "again"); !errors.Is(err, dedupe.ErrIssueEnded) {
		t.Fatalf("resolving twice: %v", err)
	}

	quiet, err := b.store.RecordIssueFailure(ctx, dedupe.IssueFailure{Source: "src", Destination: "other", Cause: "500", ExternalIDs: []string{"evt_2"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.RecordIssueSuccess(ctx, "src", "other", 1); err != nil {
		t.Fatal(err)
	}
	if n := claimBoth(time.Hour); len(n) != 0 {
		t.Fatalf("issue %d ended unannounced, yet claimed: %+v", quiet.ID, n)
	}
}

// TestIssueFailuresInBatches: a worker's gathered failures are one
// statement each, counted whole, their events listed once each; past
// MaxIssueEvents listed, a batch adds to the count and lists no more.
func TestIssueFailuresInBatches(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	batch := func(from, to, count int) dedupe.IssueRecorded {
		t.Helper()
		var ids []string
		for i := from; i < to; i++ {
			ids = append(ids, fmt.Sprintf("evt_%05d", i))
		}
		r, err := b.store.RecordIssueFailure(ctx, dedupe.IssueFailure{Source: "src", Destination: "dst", Cause: "circuit open",
			ExternalIDs: ids, Count: count})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	first := batch(0, 3, 5)
	if !first.Opened {
		t.Fatal("the first batch did not open the issue")
	}
	batch(2, 4, 0) // evt_00002 again, and one new
	issue, err := b.store.GetIssue(ctx, first.ID)
	if err != nil {
		t.Fatal(err)
	}
	if issue.Count != 7 || issue.EventCount != 4 {
		t.Fatalf("after two batches: count %d, %d events; want 7 and 4", issue.Count, issue.EventCount)
	}
	batch(4, dedupe.MaxIssueEvents+500, 0)
	batch(dedupe.MaxIssueEvents+500, dedupe.MaxIssueEvents+600, 0)
	if issue, err = b.store.GetIssue(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	if want := int64(7 + dedupe.MaxIssueEvents + 496 + 100); issue.Count != want || issue.EventCount != dedupe.MaxIssueEvents {
		t.Fatalf("past the bound: count %d, %d events; want %d and %d", issue.Count, issue.EventCount, want, dedupe.MaxIssueEvents)
	}
}
