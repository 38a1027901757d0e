package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/alerts"
	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway/admin"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/internal/testkit/proctest"
	"github.com/webhookd/webhookd/jobs"
)

// issuesToken is the admin token of the issue tests.
const issuesToken = "issues-admin-token-0123456789"

// issueFailingFor is how long the issue test's destination answers 500
// before it recovers: 2 minutes, as issue 30 asks (the test runs in
// parallel with the others, mostly waiting). WEBHOOKD_TEST_FAILING_FOR
// shortens it for a quick run (20s still spans every event's five
// attempts, backoff 100ms-1s).
func issueFailingFor(t *testing.T) time.Duration {
	t.Helper()
	v := os.Getenv("WEBHOOKD_TEST_FAILING_FOR")
	if v == "" {
		return 2 * time.Minute
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 10*time.Second {
		t.Fatalf("WEBHOOKD_TEST_FAILING_FOR=%q: want a duration of at least 10s", v)
	}
	return d
}

// flakySink answers 500 until recoverAt, then 200, and records every
// call's answer by event id.
type flakySink struct {
	recoverAt time.Time
	mu        sync.Mutex
	calls     map[string][]int // event id -> status codes answered
}

func (s *flakySink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	code := http.StatusOK
	if time.Now().Before(s.recoverAt) {
		code = http.StatusInternalServerError
	}
	s.mu.Lock()
	id := r.Header.Get("Webhookd-Event-Id")
	s.calls[id] = append(s.calls[id], code)
	s.mu.Unlock()
	w.WriteHeader(code)
}

// answered returns the events that got code at least once, and how many
// times code was answered in all.
func (s *flakySink) answered(code int) (ids []string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, codes := range s.calls {
		k := 0
		for _, c := range codes {
			if c == code {
				k++
			}
		}
		if k > 0 {
			ids = append(ids, id)
			n += k
		}
	}
	slices.Sort(ids)
	return ids, n
}

// snapshot returns a copy of the answers per event.
func (s *flakySink) snapshot() map[string][]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string][]int, len(s.calls))
	for id, codes := range s.calls {
		out[id] = slices.Clone(codes)
	}
	return out
}

// adminJSON calls an admin route with the issue tests' token and decodes
// the answer into out (when not nil); it returns the status code.
func adminJSON(t *testing.T, method, url string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+issuesToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, url, err, b)
		}
	}
	if resp.StatusCode >= 300 {
		t.Logf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	return resp.StatusCode
}

// sendIssueEvents sends the events evt_<prefix>_<i>, i < n, to gateway p.
func sendIssueEvents(t *testing.T, p *pipelinetest.Pipeline, prefix string, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		id := fmt.Sprintf("evt_%s_%02d", prefix, i)
		if code, body := p.Send(t, fmt.Appendf(nil, `{"id":%q,"type":"charge.succeeded"}`, id)); code != http.StatusAccepted {
			t.Fatalf("send %s: %d %s", id, code, body)
		}
		ids = append(ids, id)
	}
	return ids
}

// TestIssueOpensOnceAndClosesAfterRecovery: a destination answers 500 for
// 2 minutes (issueFailingFor), then 200, behind two workers on one Postgres and Redis.
// Exactly one issue opens (stripe, billing, "500"); its count is the
// number of 500s the destination answered and its events are the events
// that got one; ten successes in a row after recovery close it. A
// Slack-style server, a Standard Webhooks receiver and a real SMTP server
// each get exactly one open and one close message. Resolving
// it with a dry run lists exactly the affected events whose run is not
// done (their 5 attempts all failed, less three replayed by hand); the
// real resolve replays those and no others, and records who and why.
func TestIssueOpensOnceAndClosesAfterRecovery(t *testing.T) {
	t.Parallel()
	failingFor := issueFailingFor(t)
	dest := &flakySink{recoverAt: time.Now().Add(failingFor), calls: map[string][]int{}}
	ds := httptest.NewServer(dest)
	t.Cleanup(ds.Close)
	sinks := newAlertSinks(t)
	off := 0
	opts := pipelinetest.Options{
		AdminTokens: []string{issuesToken},
		MaxAttempts: 5,
		Alerts:      alerts.NotifierConfig{Channels: sinks.channels(t), PublicURL: "https://webhookd.example.com/", Poll: 500 * time.Millisecond},
		// The circuit stays shut: its holds would open a second issue
		// (cause "circuit open") and spread the attempts past the window.
		Sources: []pipelinetest.SourceSpec{{
			Name: pipelinetest.Source, Verify: pipelinetest.DefaultVerify(), EventID: "json:id",
			Destinations: map[string]string{"billing": ds.URL},
			Tune:         func(d *jobs.DestinationSpec) { d.Circuit = &jobs.CircuitSpec{Failures: &off} },
		}},
	}
	a := pipelinetest.Start(t, opts)
	opts.Schema, opts.Redis = a.Schema, a.Redis
	b := pipelinetest.Start(t, opts)

	// Failing: two waves, each to one gateway; every event's 5 attempts
	// fail within a few seconds (backoff 100ms-1s).
	failed := sendIssueEvents(t, a, "a", 12)
	time.Sleep(failingFor / 3)
	failed = append(failed, sendIssueEvents(t, b, "b", 12)...)

	var list admin.IssueListJSON
	pipelinetest.Eventually(t, failingFor, "an issue to open", func() bool {
		adminJSON(t, http.MethodGet, a.URL+"/admin/issues?state=open", nil, &list)
		return len(list.Issues) > 0
	})
	pipelinetest.Eventually(t, failingFor, "every failing event's runs to die", func() bool {
		var dead int
		_ = a.Schema.Pool.QueryRow(t.Context(), `SELECT count(*) FROM job_runs WHERE status = 'dead'`).Scan(&dead)
		return dead == len(failed)
	})
	if wait := time.Until(dest.recoverAt); wait > 0 {
		time.Sleep(wait)
	}
	// Recovered: new events succeed, ten in a row close the issue.
	healthy := sendIssueEvents(t, a, "ok", 15)
	pipelinetest.Eventually(t, 30*time.Second, "the issue to close", func() bool {
		adminJSON(t, http.MethodGet, b.URL+"/admin/issues?state=closed", nil, &list)
		return len(list.Issues) == 1
	})

	var all admin.IssueListJSON
	adminJSON(t, http.MethodGet, a.URL+"/admin/issues", nil, &all)
	if len(all.Issues) != 1 {
		t.Fatalf("want exactly one issue, got %+v", all.Issues)
	}
	var issue dedupe.Issue
	if code := adminJSON(t, http.MethodGet, fmt.Sprintf("%s/admin/issues/%d", a.URL, all.Issues[0].ID), nil, &issue); code != http.StatusOK {
		t.Fatalf("issue detail: %d", code)
	}
	affected, fiveHundreds := dest.answered(http.StatusInternalServerError)
	slices.Sort(failed)
	if issue.Source != pipelinetest.Source || issue.Destination != "billing" || issue.Cause != "500" || issue.State != dedupe.IssueClosed {
		t.Fatalf("issue = %+v", issue)
	}
	if int(issue.Count) != fiveHundreds || fiveHundreds != len(failed)*5 {
		t.Fatalf("issue count %d, destination answered 500 %d times (%d events x 5 attempts)", issue.Count, fiveHundreds, len(failed))
	}
	got := slices.Sorted(slices.Values(issue.Events))
	if !slices.Equal(got, affected) || !slices.Equal(affected, failed) {
		t.Fatalf("issue events %v\ndestination's 500s went to %v\nsent while failing %v", got, affected, failed)
	}
	if !issue.FirstSeen.Before(issue.LastSeen) || issue.EndedAt == nil {
		t.Fatalf("issue times: %+v", issue)
	}
	// Each channel got one message when it opened and one when it
	// closed, from one of the two processes; the webhook's signature
	// verified.
	pipelinetest.Eventually(t, 10*time.Second, "the open and close messages", func() bool {
		s, w, m := sinks.counts()
		return s >= 2 && w >= 2 && m >= 2
	})
	checkAlerts := func() {
		t.Helper()
		sinks.mu.Lock()
		defer sinks.mu.Unlock()
		pageURL := fmt.Sprintf("https://webhookd.example.com/admin/view/issues/%d", issue.ID)
		if len(sinks.webhooks) != 2 || sinks.badSigs != 0 {
			t.Fatalf("webhook got %d messages (%d badly signed), want 2", len(sinks.webhooks), sinks.badSigs)
		}
		for i, typ := range []string{"issue.opened", "issue.closed"} {
			m := sinks.webhooks[i]
			if m.Type != typ || m.URL != pageURL || m.Issue.ID != issue.ID || m.Issue.Cause != "500" || m.Issue.Destination != "billing" {
				t.Errorf("webhook message %d = %+v, want %s linking %s", i, m, typ, pageURL)
			}
		}
		if m := sinks.webhooks[1]; m.Issue.State != dedupe.IssueClosed || m.Issue.Count != issue.Count {
			t.Errorf("the close message's issue = %+v", m.Issue)
		}
		if len(sinks.slack) != 2 || !strings.Contains(sinks.slack[0], "opened") || !strings.Contains(sinks.slack[1], "closed") ||
			!strings.Contains(sinks.slack[0], pageURL) {
			t.Errorf("slack got %q", sinks.slack)
		}
		if len(sinks.mails) != 2 {
			t.Fatalf("smtp got %d mails, want 2", len(sinks.mails))
		}
		for i, what := range []string{"opened", "closed"} {
			m := sinks.mails[i]
			if m.from != "webhookd@example.com" || !slices.Equal(m.to, []string{"oncall@example.com"}) ||
				!strings.Contains(m.data, "Subject: ") || !strings.Contains(m.data, what) || !strings.Contains(m.data, pageURL) {
				t.Errorf("mail %d = %+v", i, m)
			}
		}
	}
	checkAlerts()

	// Three affected events replayed by hand are done: the resolve
	// leaves them out.
	byHand := failed[:3]
	for _, id := range byHand {
		if code := adminJSON(t, http.MethodPost, a.URL+"/admin/events/"+pipelinetest.Source+"/"+id+"/replay", nil, nil); code != http.StatusAccepted {
			t.Fatalf("replay %s: %d", id, code)
		}
	}
	pipelinetest.Eventually(t, 10*time.Second, "the hand replays to be done", func() bool {
		var done int
		_ = a.Schema.Pool.QueryRow(t.Context(), `SELECT count(*) FROM job_runs WHERE status = 'done' AND external_id = ANY($1)`, byHand).Scan(&done)
		return done == len(byHand)
	})
	wantReplayed := failed[3:]

	var dry admin.ResolveJSON
	url := fmt.Sprintf("%s/admin/issues/%d/resolve", b.URL, issue.ID)
	if code := adminJSON(t, http.MethodPost, url, map[string]any{"replay": true, "dry_run": true, "reason": "billing fixed"}, &dry); code != http.StatusOK {
		t.Fatalf("dry run: %d", code)
	}
	if ids := issueEventIDs(dry.Events); !slices.Equal(ids, wantReplayed) {
		t.Fatalf("dry run lists %v, want the affected events not done %v", ids, wantReplayed)
	}
	checkIssuePages(t, a.URL, issue, wantReplayed)
	checkIssueCommands(t, a.URL, issue, wantReplayed)
	before := dest.snapshot()
	if dry.Issue.State != dedupe.IssueClosed {
		t.Fatalf("a dry run changed the issue: %+v", dry.Issue)
	}

	var real admin.ResolveJSON
	body := map[string]any{"replay": true, "dry_run": false, "reason": "billing fixed", "by": "oncall@example.com"}
	if code := adminJSON(t, http.MethodPost, url, body, &real); code != http.StatusOK {
		t.Fatalf("resolve: %d", code)
	}
	if real.Failed != 0 || len(real.Replayed) != len(wantReplayed) {
		t.Fatalf("resolve replayed %d (failed %d), want %d", len(real.Replayed), real.Failed, len(wantReplayed))
	}
	if real.Issue.State != dedupe.IssueResolved || real.Issue.ResolvedBy != "oncall@example.com" || real.Issue.ResolveReason != "billing fixed" {
		t.Fatalf("resolved issue = %+v", real.Issue)
	}
	pipelinetest.Eventually(t, 15*time.Second, "the replayed events to be delivered", func() bool {
		var done int
		_ = a.Schema.Pool.QueryRow(t.Context(), `SELECT count(*) FROM job_runs WHERE status = 'done' AND external_id = ANY($1)`, wantReplayed).Scan(&done)
		return done == len(wantReplayed)
	})
	time.Sleep(time.Second) // a stray replay would land meanwhile
	after := dest.snapshot()
	var called []string
	for id, codes := range after {
		if len(codes) != len(before[id]) {
			called = append(called, id)
			if extra := codes[len(before[id]):]; !slices.Equal(extra, []int{http.StatusOK}) {
				t.Errorf("event %s got %v from the resolve, want one 200", id, extra)
			}
		}
	}
	slices.Sort(called)
	if !slices.Equal(called, wantReplayed) {
		t.Fatalf("the resolve called the destination for %v, want exactly %v (not the hand-replayed %v nor the healthy %v)",
			called, wantReplayed, byHand, healthy)
	}
	var stored dedupe.Issue
	adminJSON(t, http.MethodGet, fmt.Sprintf("%s/admin/issues/%d", a.URL, issue.ID), nil, &stored)
	if stored.State != dedupe.IssueResolved || stored.ResolvedBy != "oncall@example.com" {
		t.Fatalf("stored issue = %+v", stored)
	}
	// Resolving a closed issue sends nothing more.
	checkAlerts()
}

// issueEventIDs returns the events' ids, sorted.
func issueEventIDs(evs []dedupe.IssueEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.ExternalID)
	}
	slices.Sort(out)
	return out
}

// TestIssueAPIRefusesBadInput: the issue routes answer a clear 4xx to a
// bad id, an unknown issue, a bad state filter or a body of the wrong
// shape, and a read-only token may list but not resolve.
func TestIssueAPIRefusesBadInput(t *testing.T) {
	t.Parallel()
	ds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(ds.Close)
	const readOnly = "issues-read-only-token-0123456789"
	p := pipelinetest.Start(t, pipelinetest.Options{Destinations: map[string]string{"billing": ds.URL}, AdminTokens: []string{issuesToken},
		AdminReadOnlyTokens: []string{readOnly}})
	for _, c := range []struct {
		method, path string
		body         any
		want         int
	}{
		{http.MethodGet, "/admin/issues?state=bogus", nil, http.StatusBadRequest},
		{http.MethodGet, "/admin/issues/abc", nil, http.StatusBadRequest},
		{http.MethodGet, "/admin/issues/-1", nil, http.StatusBadRequest},
		{http.MethodGet, "/admin/issues/999", nil, http.StatusNotFound},
		{http.MethodPost, "/admin/issues/999/resolve", map[string]any{"dry_run": true}, http.StatusNotFound},
		{http.MethodPost, "/admin/issues/1/resolve", map[string]any{"dry_run": "yes"}, http.StatusBadRequest},
		{http.MethodGet, "/admin/issues", nil, http.StatusOK},
	} {
		if got := adminJSON(t, c.method, p.URL+c.path, c.body, nil); got != c.want {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, got, c.want)
		}
	}
	for method, want := range map[string]int{http.MethodGet: http.StatusOK, http.MethodPost: http.StatusForbidden} {
		path := "/admin/issues"
		if method == http.MethodPost {
			path = "/admin/issues/1/resolve"
		}
		req, _ := http.NewRequest(method, p.URL+path, strings.NewReader(`{"dry_run":true}`))
		req.Header.Set("Authorization", "Bearer "+readOnly)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("read-only %s %s: %d, want %d", method, path, resp.StatusCode, want)
		}
	}
}

// checkIssuePages: the issues page lists the issue, its page lists its
// events, and the page's dry run lists exactly notDone.
func checkIssuePages(t *testing.T, base string, issue dedupe.Issue, notDone []string) {
	t.Helper()
	page := func(method, path, form string) string {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(form))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+issuesToken)
		req.Header.Set("Accept", "text/html")
		if form != "" {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		return string(b)
	}
	list := page(http.MethodGet, "/admin/view/issues?state=closed", "")
	if !strings.Contains(list, fmt.Sprintf(`href="/admin/view/issues/%d"`, issue.ID)) || !strings.Contains(list, ">billing<") {
		t.Fatalf("issues page does not list issue %d:\n%s", issue.ID, list)
	}
	detail := page(http.MethodGet, fmt.Sprintf("/admin/view/issues/%d", issue.ID), "")
	for _, id := range issue.Events {
		if !strings.Contains(detail, ">"+id+"<") {
			t.Fatalf("issue page lacks event %s", id)
		}
	}
	dry := page(http.MethodPost, fmt.Sprintf("/admin/view/issues/%d/resolve", issue.ID), "replay=1&dry_run=1&reason=look")
	start := strings.Index(dry, `<ul id="not-done">`)
	end := strings.Index(dry[start:], "</ul>")
	if start < 0 || end < 0 {
		t.Fatalf("dry run page has no list:\n%s", dry)
	}
	listed := strings.Count(dry[start:start+end], "<li>")
	if listed != len(notDone) {
		t.Fatalf("the page's dry run lists %d events, want %d", listed, len(notDone))
	}
	for _, id := range notDone {
		if !strings.Contains(dry[start:start+end], ">"+id+"<") {
			t.Fatalf("the page's dry run lacks %s", id)
		}
	}
}

// checkIssueCommands: webhookd issues list|show|resolve --dry-run, over
// the admin API, print the issue, its events, and exactly notDone.
func checkIssueCommands(t *testing.T, base string, issue dedupe.Issue, notDone []string) {
	t.Helper()
	bin := proctest.Binary(t)
	cli := func(args ...string) string {
		t.Helper()
		out, err := operatorCommand(bin, base, issuesToken, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("webhookd %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	id := strconv.FormatInt(issue.ID, 10)
	if out := cli("issues", "list", "--state", "closed"); !strings.Contains(out, "billing") || !strings.Contains(out, "1 issues shown") {
		t.Fatalf("issues list:\n%s", out)
	}
	if out := cli("issues", "show", id); strings.Count(out, "evt_") != len(issue.Events) || !strings.Contains(out, "failing with 500") {
		t.Fatalf("issues show:\n%s", out)
	}
	out := cli("issues", "resolve", id, "--replay", "--dry-run", "--reason", "look")
	if !strings.Contains(out, fmt.Sprintf("dry run: %d affected events not done", len(notDone))) || strings.Count(out, "evt_") != len(notDone) {
		t.Fatalf("issues resolve --dry-run:\n%s", out)
	}
	for _, e := range notDone {
		if !strings.Contains(out, e) {
			t.Fatalf("issues resolve --dry-run lacks %s:\n%s", e, out)
		}
	}
	if out, err := operatorCommand(bin, base, issuesToken, "issues", "show", "x").CombinedOutput(); err == nil || !strings.Contains(string(out), "positive integer") {
		t.Fatalf("issues show x: %v\n%s", err, out)
	}
}
