package admin_test

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway/admin"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
)

// searchFixture sends five events, two of which fail, and gives each a
// type (as the ingest of another branch records it).
func searchFixture(t *testing.T, b *bundle) {
	t.Helper()
	b.send(t, "evt_1Nx_ok")
	b.send(t, "evt_1Ny_ok")
	b.send(t, "ch_9_ok")
	for _, id := range []string{"evt_1Nx_ok", "evt_1Ny_ok", "ch_9_ok"} {
		b.waitState(t, id, dedupe.StatusDone)
	}
	b.dest.setStatus(http.StatusBadRequest)
	b.send(t, "evt_1Nx_bad")
	b.send(t, "ch_9_bad")
	b.waitState(t, "evt_1Nx_bad", dedupe.StatusFailed)
	b.waitState(t, "ch_9_bad", dedupe.StatusFailed)
	b.dest.setStatus(http.StatusOK)
	if _, err := b.p.Schema.Pool.Exec(t.Context(), `UPDATE events SET event_type = CASE WHEN external_id LIKE 'evt%' THEN 'invoice.paid' ELSE 'charge.refund.updated' END`); err != nil {
		t.Fatal(err)
	}
}

func eventIDs(l admin.EventListJSON) []string {
	var out []string
	for _, e := range l.Events {
		out = append(out, e.EventID)
	}
	slices.Sort(out)
	return out
}

// TestEventSearchAPI: GET /admin/events narrows by id prefix, type glob,
// destination and run status, alone and together, with the total; one
// URL per event answers JSON to an API client and the page to a browser;
// the old page address redirects.
func TestEventSearchAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	searchFixture(t, b)
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"", []string{"ch_9_bad", "ch_9_ok", "evt_1Nx_bad", "evt_1Nx_ok", "evt_1Ny_ok"}},
		{"q=evt_1Nx", []string{"evt_1Nx_bad", "evt_1Nx_ok"}},
		{"q=evt_1Nx_ok", []string{"evt_1Nx_ok"}},
		{"q=EVT", nil},
		{"type=charge.*", []string{"ch_9_bad", "ch_9_ok"}},
		{"type=*.paid", []string{"evt_1Nx_bad", "evt_1Nx_ok", "evt_1Ny_ok"}},
		{"type=charge", nil},
		{"status=failed", []string{"ch_9_bad", "evt_1Nx_bad"}},
		{"destination=billing&status=failed", []string{"ch_9_bad", "evt_1Nx_bad"}},
		{"q=evt&status=failed", []string{"evt_1Nx_bad"}},
		{"q=ch_&type=charge.*&status=done", []string{"ch_9_ok"}},
		{"q=evt_1N&since=1h&state=done", []string{"evt_1Nx_ok", "evt_1Ny_ok"}},
		{"q=evt_1N&since=2d&state=done", []string{"evt_1Nx_ok", "evt_1Ny_ok"}},
		{"since=1w&until=1d", nil},
	} {
		var l admin.EventListJSON
		if code := b.do(t, "GET", "/admin/events?"+c.query, "", &l); code != http.StatusOK {
			t.Fatalf("GET /admin/events?%s: %d", c.query, code)
		}
		if got := eventIDs(l); !slices.Equal(got, c.want) || l.Total != int64(len(c.want)) || l.TotalAtLeast {
			t.Errorf("?%s: %q total %d, want %q", c.query, got, l.Total, c.want)
		}
		for _, e := range l.Events {
			if e.EventType == "" {
				t.Errorf("?%s: %s listed without its type", c.query, e.EventID)
			}
		}
	}
	for _, q := range []string{"status=bogus", "state=bogus", "q=a%00b", "type=%FF", "since=2x", "since=-1d"} {
		if code := b.do(t, "GET", "/admin/events?"+q, "", nil); code != http.StatusBadRequest {
			t.Errorf("?%s: %d, want 400", q, code)
		}
	}
	// An unknown name is a typo to point at, not "0 events match".
	for q, want := range map[string]string{
		"destination=biling": `unknown destination "biling" (did you mean billing?)`,
		"source=strpe":       `unknown source "strpe" (did you mean stripe?)`,
	} {
		var e struct{ Error string }
		if code := b.do(t, "GET", "/admin/events?"+q, "", &e); code != http.StatusBadRequest || !strings.Contains(e.Error, want) {
			t.Errorf("?%s: %d %q, want 400 saying %s", q, code, e.Error, want)
		}
	}

	// Newer and older pages.
	var p1, p2, back admin.EventListJSON
	b.do(t, "GET", "/admin/events?limit=2", "", &p1)
	b.do(t, "GET", "/admin/events?limit=2&cursor="+p1.Next, "", &p2)
	b.do(t, "GET", "/admin/events?limit=2&cursor="+p2.Prev, "", &back)
	if p1.Prev != "" || p2.Prev == "" || !slices.Equal(eventIDs(back), eventIDs(p1)) || back.Total != 5 {
		t.Errorf("paging: first %q (prev %q), second %q, back %q", eventIDs(p1), p1.Prev, eventIDs(p2), eventIDs(back))
	}

	get := func(path, accept string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", b.srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+b.token)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(body)
	}
	browser := "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
	resp, body := get("/admin/events/stripe/evt_1Nx_bad", "*/*")
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") || !strings.Contains(body, `"event_id":"evt_1Nx_bad"`) {
		t.Errorf("the event's URL for an API client: %s %.200s", ct, body)
	}
	resp, body = get("/admin/events/stripe/evt_1Nx_bad", browser)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") || !strings.Contains(body, `id="runs"`) ||
		!strings.Contains(resp.Header.Get("Vary"), "Accept") {
		t.Errorf("the event's URL for a browser: %s Vary %q %.200s", ct, resp.Header.Get("Vary"), body)
	}
	resp, body = get("/admin/events?q=evt_1Nx", browser)
	if !strings.Contains(body, `id="events"`) || !strings.Contains(body, "evt_1Nx_bad") || strings.Contains(body, "ch_9_ok") {
		t.Errorf("the list's URL for a browser: %d %.300s", resp.StatusCode, body)
	}
	resp, _ = get("/admin/view/stripe/evt_1Nx_bad?replayed=enqueued", browser)
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/admin/events/stripe/evt_1Nx_bad?replayed=enqueued" {
		t.Errorf("old page address: %d to %q, want 301 to the event's URL", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// TestBrowserSearchAndBulkReplay: in headless Chromium, an operator finds
// an event by a prefix of its id and by type, then replays the failed
// events of a filter: preview (count and sample), confirm with a reason,
// and only those are replayed, with the reason recorded.
func TestBrowserSearchAndBulkReplay(t *testing.T) {
	t.Parallel()
	var dialogs atomic.Int64
	ctx := newBrowser(t, &dialogs)
	b := setup(t, options{token: "search-token"})
	searchFixture(t, b)

	step(t, ctx, "signing in",
		chromedp.Navigate(b.srv.URL+"/admin/login?next=/admin/events"),
		chromedp.WaitVisible(chromedp.CSS(`input[name=token]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=token]`), "search-token"),
		chromedp.Submit(chromedp.CSS(`input[name=token]`)),
		chromedp.WaitVisible(chromedp.CSS(`#search-form`)),
	)
	rows := func() []string {
		t.Helper()
		return strings.Fields(evaluate(t, ctx, `Array.from(document.querySelectorAll("#events .event-link")).map(a => a.textContent).sort().join(" ")`))
	}
	if got := text(t, ctx, `#total`); got != "5" {
		t.Errorf("total %q, want 5", got)
	}
	step(t, ctx, "searching by an id prefix",
		markStale,
		chromedp.SendKeys(chromedp.CSS(`#filter-q`), "evt_1Nx"),
		chromedp.Click(chromedp.CSS(`#search`)),
		freshEvents,
	)
	if got := rows(); !slices.Equal(got, []string{"evt_1Nx_bad", "evt_1Nx_ok"}) {
		t.Errorf("search q=evt_1Nx: %q", got)
	}
	if got := evaluate(t, ctx, `Array.from(document.querySelectorAll("#events .event-type")).map(a => a.textContent).join(",")`); got != "invoice.paid,invoice.paid" {
		t.Errorf("type column: %q", got)
	}
	step(t, ctx, "searching by type and run status",
		markStale,
		chromedp.Clear(chromedp.CSS(`#filter-q`)),
		chromedp.SendKeys(chromedp.CSS(`#filter-type`), "charge.*"),
		chromedp.SetValue(chromedp.CSS(`#filter-status`), dedupe.StatusFailed),
		chromedp.Click(chromedp.CSS(`#search`)),
		freshEvents,
	)
	if got := rows(); !slices.Equal(got, []string{"ch_9_bad"}) {
		t.Errorf("search type=charge.* status=failed: %q", got)
	}

	// Bulk replay of every failed event: preview, then confirm.
	callsBefore := b.dest.total()
	step(t, ctx, "previewing a bulk replay",
		chromedp.Navigate(b.srv.URL+"/admin/events?status=failed"),
		chromedp.WaitVisible(chromedp.CSS(`#bulk-replay`)),
		chromedp.Click(chromedp.CSS(`#bulk-replay`)),
		chromedp.WaitVisible(chromedp.CSS(`#bulk-form`)),
	)
	if got := text(t, ctx, `#bulk-count strong`); got != "2" {
		t.Errorf("preview count %q, want 2", got)
	}
	if got := evaluate(t, ctx, `Array.from(document.querySelectorAll("#bulk-sample .bulk-row a")).map(a => a.textContent).sort().join(" ")`); got != "ch_9_bad evt_1Nx_bad" {
		t.Errorf("preview sample %q", got)
	}
	stays(t, 300*time.Millisecond, "destination calls during the preview", func() bool { return b.dest.total() == callsBefore })
	step(t, ctx, "confirming the bulk replay",
		chromedp.SendKeys(chromedp.CSS(`#bulk-reason`), "billing fixed the 400"),
		chromedp.Click(chromedp.CSS(`#bulk-confirm`)),
		chromedp.WaitVisible(chromedp.CSS(`#bulk-done`)),
	)
	if got := text(t, ctx, `#bulk-done`); !strings.Contains(got, "Replayed 2 events: 2 enqueued, 0 failed") {
		t.Errorf("bulk replay said %q", got)
	}
	for _, id := range []string{"evt_1Nx_bad", "ch_9_bad"} {
		d := b.waitState(t, id, dedupe.StatusDone)
		if d.Runs[0].ReplayReason != "billing fixed the 400" {
			t.Errorf("%s replayed with reason %q", id, d.Runs[0].ReplayReason)
		}
	}
	pipelinetest.Eventually(t, 10*time.Second, "the two replays called", func() bool { return b.dest.total() == callsBefore+2 })
	stays(t, 500*time.Millisecond, "destination calls", func() bool { return b.dest.total() == callsBefore+2 })
}

// markStale marks the page shown now, so freshEvents waits for the next
// one: the #events list is on both.
var markStale = chromedp.Evaluate[chromedp.Void](`void (document.body.dataset.stale = "1")`)

// freshEvents waits for the #events list of a page loaded after markStale.
var freshEvents = chromedp.WaitVisible(chromedp.CSS(`body:not([data-stale]) #events`))

// TestPayloadSearch: q also matches inside payloads when since bounds
// the window to at most 7 days; without since, or with a wider window,
// it matches ids only.
func TestPayloadSearch(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	for id, customer := range map[string]string{"evt_pay_a": "cus_123", "evt_pay_b": "cus_456"} {
		code, body := b.p.Send(t, []byte(`{"id":"`+id+`","type":"invoice.paid","data":{"object":{"customer":"`+customer+`"}}}`))
		if code != http.StatusAccepted {
			t.Fatalf("send %s: %d %s", id, code, body)
		}
		b.waitState(t, id, dedupe.StatusDone)
	}
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"q=cus_123&since=1h", []string{"evt_pay_a"}},
		{"q=cus_&since=24h", []string{"evt_pay_a", "evt_pay_b"}},
		{"q=evt_pay_b&since=1h", []string{"evt_pay_b"}},
		{"q=cus_123", nil},            // no window: ids only
		{"q=cus_123&since=192h", nil}, // 8 days: ids only
		{"q=cus_123&since=" + time.Now().Add(-time.Hour).UTC().Format(time.RFC3339) + "&until=" + time.Now().Add(time.Hour).UTC().Format(time.RFC3339), []string{"evt_pay_a"}},
	} {
		var l admin.EventListJSON
		if code := b.do(t, http.MethodGet, "/admin/events?"+c.query, "", &l); code != http.StatusOK {
			t.Fatalf("%s: %d", c.query, code)
		}
		if got := eventIDs(l); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.query, got, c.want)
		}
	}
}
