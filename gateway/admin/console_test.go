package admin_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway/admin"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
)

// requestLog records every request a browser tab makes and every CSP
// violation or error it reports.
type requestLog struct {
	mu       sync.Mutex
	urls     []string
	problems []string
}

// watch starts recording ctx's tab.
func (l *requestLog) watch(t *testing.T, ctx context.Context) {
	t.Helper()
	err := chromedp.Listen(ctx, func(ev any) {
		l.mu.Lock()
		defer l.mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			l.urls = append(l.urls, ev.Request.URL)
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.EntryLevelError {
				l.problems = append(l.problems, ev.Entry.Text+" "+ev.Entry.URL)
			}
		case *runtime.EventExceptionThrown:
			l.problems = append(l.problems, ev.ExceptionDetails.Text+" "+ev.ExceptionDetails.URL)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, log.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
}

// outside returns the recorded requests to another host than host (data:
// URLs load nothing).
func (l *requestLog) outside(host string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, raw := range l.urls {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "data" && u.Host != host) {
			out = append(out, raw)
		}
	}
	return out
}

func (l *requestLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.urls)
}

func (l *requestLog) errors() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.problems)
}

// TestBrowserConsoleStaysHome walks every admin page, the queue
// dashboard included, in headless Chromium: no request goes to another
// host, no page breaks its CSP or throws, the dashboard draws its icons
// and its font from this server, links back to Events, offers no
// "Send Feedback", and ?tab=archived opens the archived tasks.
func TestBrowserConsoleStaysHome(t *testing.T) {
	t.Parallel()
	var dialogs atomic.Int64
	ctx := newBrowser(t, &dialogs)
	b := setup(t, options{token: "console-token"})
	b.send(t, "evt_home")
	b.waitState(t, "evt_home", dedupe.StatusDone)
	var reqs requestLog
	reqs.watch(t, ctx)
	srv, _ := url.Parse(b.srv.URL)

	step(t, ctx, "opening the login page",
		chromedp.Navigate(b.srv.URL+"/admin/login?next=/admin/"),
		chromedp.WaitVisible(chromedp.CSS(`input[name=token]`)),
	)
	if nav := evaluate(t, ctx, `String(document.querySelectorAll("header nav, #sign-out").length)`); nav != "0" {
		t.Errorf("the login page shows %s of the nav and Sign out while signed out", nav)
	}
	step(t, ctx, "signing in",
		chromedp.SendKeys(chromedp.CSS(`input[name=token]`), "console-token"),
		chromedp.Submit(chromedp.CSS(`input[name=token]`)),
		chromedp.WaitVisible(chromedp.CSS(`#events`)),
	)
	for _, page := range []struct{ path, sel string }{
		{"/admin/events?state=done", `#events`},
		{"/admin/events/stripe/evt_home", `#attempts`},
		{"/admin/view/destinations", `main table`},
		{"/admin/view/rejected", `main`},
		{"/admin/view/issues", `main`},
		{"/admin/view/bulk-replay?state=done", `main`},
		{"/admin/view/destinations/stripe/" + destName, `#window-day`},
	} {
		step(t, ctx, "opening "+page.path,
			chromedp.Navigate(b.srv.URL+page.path),
			chromedp.WaitVisible(chromedp.CSS(page.sel)),
		)
	}

	// The small things of the event page and the list.
	step(t, ctx, "opening the event", chromedp.Navigate(b.srv.URL+"/admin/events/stripe/evt_home"), chromedp.WaitVisible(chromedp.CSS(`#headers`)))
	if hdr := text(t, ctx, `#headers`); evaluate(t, ctx, `document.getElementById("headers").tagName`) != "TABLE" ||
		!strings.Contains(hdr, "Content-Type") || strings.Contains(hdr, `["`) {
		t.Errorf("headers are not a name: value table:\n%s", hdr)
	}
	if res := text(t, ctx, `#runs pre.result`); strings.Contains(res, `\"`) || !strings.Contains(res, `"ok": true`) {
		t.Errorf("the run's result is not shown as indented JSON: %q", res)
	}
	step(t, ctx, "searching for nothing", chromedp.Navigate(b.srv.URL+"/admin/events?q=nothing_like_it"), chromedp.WaitVisible(chromedp.CSS(`#events`)))
	if n := evaluate(t, ctx, `String(document.querySelectorAll("#bulk-replay").length)`); n != "0" || !strings.Contains(text(t, ctx, `#events`), "No events match") {
		t.Errorf("a search matching nothing offers Replay these… (%s links)", n)
	}
	if ph := evaluate(t, ctx, `document.querySelector("input[name=until]").placeholder`); strings.Contains(ph, "01-02T15:04") || !strings.HasPrefix(ph, time.Now().UTC().Format("2006-01-02T")) {
		t.Errorf("Until placeholder %q", ph)
	}

	// At 420 px no page is wider than the screen.
	step(t, ctx, "narrowing the window", chromedp.EmulateViewport(420, 900))
	for _, path := range []string{"/admin/events", "/admin/events/stripe/evt_home", "/admin/view/destinations",
		"/admin/view/destinations/stripe/" + destName, "/admin/view/rejected", "/admin/view/issues"} {
		step(t, ctx, "opening "+path+" at 420 px", chromedp.Navigate(b.srv.URL+path), chromedp.WaitVisible(chromedp.CSS(`main`)))
		if w := evaluate(t, ctx, `String(document.documentElement.scrollWidth)`); w != "420" {
			t.Errorf("%s at 420 px is %s px wide", path, w)
		}
	}
	step(t, ctx, "widening the window", chromedp.EmulateViewport(1400, 1000))

	// The dashboard: asynqmon's app draws (its scripts ran under the
	// CSP), in Roboto from this server, with its SVG icons.
	step(t, ctx, "opening the queue dashboard",
		chromedp.Navigate(b.srv.URL+"/admin/queues/"),
		chromedp.WaitVisible(chromedp.CSS(`#root svg.MuiSvgIcon-root`)),
		chromedp.WaitVisible(chromedp.CSS(`#webhookd-events`)),
	)
	pipelineQueue := b.p.Redis.Queue
	step(t, ctx, "waiting for the queue list", chromedp.WaitVisible(chromedp.Search(`//*[@id="root"]//*[text()="`+pipelineQueue+`"]`)))
	if loaded := evaluate(t, ctx, `document.fonts.check("16px Roboto") && [...document.fonts].some(f => f.family.includes("Roboto") && f.status == "loaded") ? "yes" : "no"`); loaded != "yes" {
		t.Errorf("Roboto is not loaded on the dashboard")
	}
	if n := evaluate(t, ctx, `String(document.querySelectorAll("#root svg.MuiSvgIcon-root path").length)`); n == "0" {
		t.Errorf("the dashboard draws no icon")
	}
	if fb := evaluate(t, ctx, `[...document.querySelectorAll("#root a")].filter(a => a.offsetParent !== null && a.textContent.includes("Feedback")).length + ""`); fb != "0" {
		t.Errorf("%s visible Send Feedback links", fb)
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	shot, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	cancel()
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	saveScreenshot(t, "queue-dashboard.png", shot)

	// ?tab=archived opens the queue's archived tasks.
	step(t, ctx, "opening ?tab=archived",
		chromedp.Navigate(b.srv.URL+"/admin/queues/?tab=archived"),
		chromedp.WaitVisible(chromedp.CSS(`#root svg.MuiSvgIcon-root`)),
	)
	if loc := evaluate(t, ctx, `location.pathname + location.search`); loc != "/admin/queues/queues/"+pipelineQueue+"?status=archived" {
		t.Errorf("?tab=archived went to %s", loc)
	}
	step(t, ctx, "waiting for the archived tab", chromedp.WaitVisible(chromedp.Search(
		`//div[contains(@class,"MuiChip-colorPrimary") and contains(., "Archived")]`)))

	// The way back.
	step(t, ctx, "going back to Events",
		chromedp.Click(chromedp.CSS(`#webhookd-events`)),
		chromedp.WaitVisible(chromedp.CSS(`#events`)),
	)

	if n := reqs.count(); n < 10 {
		t.Fatalf("only %d requests recorded: the recorder does not work", n)
	}
	if out := reqs.outside(srv.Host); len(out) > 0 {
		t.Errorf("requests to another host than %s:\n%s", srv.Host, strings.Join(out, "\n"))
	}
	if errs := reqs.errors(); len(errs) > 0 {
		t.Errorf("the pages reported errors:\n%s", strings.Join(errs, "\n"))
	}
}

// TestBrowserEventPageFollows: an event page and the list opened while
// its delivery is under way show done when it ends, without a reload, and
// times read as words ("… ago").
func TestBrowserEventPageFollows(t *testing.T) {
	t.Parallel()
	var dialogs atomic.Int64
	ctx := newBrowser(t, &dialogs)
	b := setup(t, options{token: "live-token"})

	// The list, opened during a call.
	release := b.dest.hold()
	t.Cleanup(release)
	b.send(t, "evt_listed")
	b.waitState(t, "evt_listed", dedupe.StatusRunning)
	step(t, ctx, "signing in",
		chromedp.Navigate(b.srv.URL+"/admin/login?next=/admin/events"),
		chromedp.WaitVisible(chromedp.CSS(`input[name=token]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=token]`), "live-token"),
		chromedp.Submit(chromedp.CSS(`input[name=token]`)),
		chromedp.WaitVisible(chromedp.CSS(`#events tr.event-row[data-live][data-state=running]`)),
	)
	// A mark that a reload would wipe.
	evaluate(t, ctx, `window.notReloaded = "yes"`)
	release()
	step(t, ctx, "waiting for done in the list", chromedp.WaitVisible(chromedp.CSS(`#events tr.event-row[data-state=done]`)))
	if mark := evaluate(t, ctx, `String(window.notReloaded)`); mark != "yes" {
		t.Errorf("the list was reloaded (mark %q)", mark)
	}
	// Nothing is in flight any more, so the list stops asking.
	if live := evaluate(t, ctx, `String(document.querySelectorAll("[data-live]").length)`); live != "0" {
		t.Errorf("the list marks %s rows live after delivery", live)
	}

	// The event page, opened during a call.
	release = b.dest.hold()
	t.Cleanup(release)
	b.send(t, "evt_live")
	b.waitState(t, "evt_live", dedupe.StatusRunning)
	step(t, ctx, "opening the event", chromedp.Navigate(b.srv.URL+"/admin/events/stripe/evt_live"), chromedp.WaitVisible(chromedp.CSS(`#event-state`)))
	if state := text(t, ctx, `#event-state`); state != dedupe.StatusRunning {
		t.Fatalf("event page opened during the call shows %q", state)
	}
	evaluate(t, ctx, `window.notReloaded = "yes"`)
	if rel := text(t, ctx, `#facts time.rel`); !strings.HasSuffix(rel, " ago") {
		t.Errorf("received time in words: %q", rel)
	}
	release()
	step(t, ctx, "waiting for done", chromedp.WaitVisible(chromedp.CSS(`#event-state.state-done`)))
	if mark := evaluate(t, ctx, `String(window.notReloaded)`); mark != "yes" {
		t.Errorf("the page was reloaded (mark %q)", mark)
	}
	if attempts := text(t, ctx, `#attempts`); !strings.Contains(attempts, "200") {
		t.Errorf("attempt log after the call:\n%s", attempts)
	}
}

// TestBrowserDestinationPage: after a run against a destination that
// answers 500 and then 200, the destination's page counts what the
// destination saw, draws its charts, lists the failed calls, and pauses
// and resumes it.
func TestBrowserDestinationPage(t *testing.T) {
	t.Parallel()
	var dialogs atomic.Int64
	ctx := newBrowser(t, &dialogs)
	b := setup(t, options{token: "dest-token"})
	b.dest.setStatus(http.StatusInternalServerError)
	b.send(t, "evt_flaky")
	pipelinetest.Eventually(t, 20*time.Second, "a 500", func() bool { return b.dest.answered(http.StatusInternalServerError) >= 1 })
	b.dest.setStatus(http.StatusOK)
	b.waitState(t, "evt_flaky", dedupe.StatusDone)
	b.send(t, "evt_fine")
	b.waitState(t, "evt_fine", dedupe.StatusDone)
	// And one the destination refuses for good: not delivered.
	b.dest.setStatus(http.StatusBadRequest)
	b.send(t, "evt_refused")
	b.waitState(t, "evt_refused", dedupe.StatusFailed)
	b.dest.setStatus(http.StatusOK)
	failed, ok := b.dest.answered(http.StatusInternalServerError)+b.dest.answered(http.StatusBadRequest), b.dest.answered(http.StatusOK)
	if ok != 2 || b.dest.answered(http.StatusBadRequest) != 1 || b.dest.total() != failed+ok {
		t.Fatalf("the destination answered %d × 500 or 400, %d × 200 of %d calls", failed, ok, b.dest.total())
	}

	step(t, ctx, "signing in",
		chromedp.Navigate(b.srv.URL+"/admin/login?next=/admin/view/destinations"),
		chromedp.WaitVisible(chromedp.CSS(`input[name=token]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=token]`), "dest-token"),
		chromedp.Submit(chromedp.CSS(`input[name=token]`)),
		chromedp.WaitVisible(chromedp.CSS(`a.destination-link`)),
		chromedp.Click(chromedp.CSS(`a.destination-link`)),
		chromedp.WaitVisible(chromedp.CSS(`#window-day`)),
	)
	rate := fmt.Sprintf("%.1f %%", 100*float64(ok)/float64(failed+ok))
	for _, w := range []string{"hour", "day"} {
		if calls := text(t, ctx, "#"+w+"-calls"); calls != strconv.Itoa(failed+ok) {
			t.Errorf("%s: %s calls shown, the destination saw %d", w, calls, failed+ok)
		}
		if got := text(t, ctx, "#"+w+"-succeeded"); got != strconv.Itoa(ok) {
			t.Errorf("%s: %s accepted shown, the destination answered 200 %d times", w, got, ok)
		}
		if got := text(t, ctx, "#"+w+"-rate"); got != rate {
			t.Errorf("%s: success rate %q, want %q", w, got, rate)
		}
		if got := text(t, ctx, "#"+w+"-latency"); !strings.Contains(got, " ms / ") {
			t.Errorf("%s: latency %q", w, got)
		}
		bars := evaluate(t, ctx, `String(document.querySelectorAll("#window-`+w+` svg.chart rect.fail").length) + "/" + document.querySelectorAll("#window-`+w+` svg.chart polyline").length`)
		if bars == "0/0" || strings.HasPrefix(bars, "0/") {
			t.Errorf("%s: charts draw %s (failed bars/latency lines)", w, bars)
		}
	}
	rows := evaluate(t, ctx, `String(document.querySelectorAll("#call-errors tbody tr").length)`)
	if errs := text(t, ctx, `#call-errors`); rows != strconv.Itoa(failed) || !strings.Contains(errs, "evt_flaky") || !strings.Contains(errs, "500") ||
		!strings.Contains(errs, "evt_refused") || !strings.Contains(errs, "400") {
		t.Errorf("last failed calls (want %d rows: evt_flaky's 500s, evt_refused's 400):\n%s", failed, errs)
	}
	// Not delivered: the refused event only (the flaky one got through).
	if affected := text(t, ctx, `#affected tbody`); !strings.Contains(affected, "evt_refused") || !strings.Contains(affected, "failed") ||
		strings.Contains(affected, "evt_flaky") {
		t.Errorf("events not delivered:\n%s", affected)
	}
	if url := text(t, ctx, `#destination-url`); !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Errorf("destination URL shown: %q", url)
	}
	if state := text(t, ctx, `#destination-state`); state != "active" {
		t.Errorf("state %q", state)
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	shot, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	cancel()
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	saveScreenshot(t, "destination-page.png", shot)

	// Send test event: one call with a key of its own, marked a test,
	// counted nowhere (not an event, not a call in the figures).
	before := b.dest.total()
	step(t, ctx, "sending a test event",
		chromedp.SendKeys(chromedp.CSS(`#test-form input[name=by]`), "dest-test"),
		chromedp.Click(chromedp.CSS(`#send-test`)),
		chromedp.WaitVisible(chromedp.CSS(`#test-result`)),
	)
	if res := text(t, ctx, `#test-result`); !strings.Contains(res, "delivered, HTTP 200") {
		t.Errorf("test event result: %q", res)
	}
	b.dest.mu.Lock()
	lastKey, testCalls := b.dest.keys[len(b.dest.keys)-1], b.dest.testCalls
	b.dest.mu.Unlock()
	if b.dest.total() != before+1 || testCalls != 1 || !strings.HasPrefix(lastKey, "stripe:billing:webhookd_test_") {
		t.Errorf("the destination got %d calls (%d marked a test), the last with key %q; want one test call with its own key",
			b.dest.total()-before, testCalls, lastKey)
	}
	if calls := text(t, ctx, "#day-calls"); calls != strconv.Itoa(failed+ok) {
		t.Errorf("after the test event the page counts %s calls, want %d (a test counts nowhere)", calls, failed+ok)
	}
	var events admin.EventListJSON
	b.token = "dest-token"
	if code := b.do(t, http.MethodGet, "/admin/events?q=webhookd_test_", "", &events); code != http.StatusOK || len(events.Events) != 0 {
		t.Errorf("the test event is listed as an event: %d, %d events", code, len(events.Events))
	}
	var n int
	if err := b.p.Schema.Pool.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM events WHERE external_id LIKE 'webhookd_test_%') +
		(SELECT count(*) FROM job_runs WHERE key LIKE '%webhookd_test_%') + (SELECT count(*) FROM delivery_attempts WHERE key LIKE '%webhookd_test_%')`).Scan(&n); err != nil || n != 0 {
		t.Errorf("the test event left %d rows (%v)", n, err)
	}

	step(t, ctx, "pausing", chromedp.Click(chromedp.CSS(`#pause`)), chromedp.WaitVisible(chromedp.CSS(`#resume`)))
	if state := text(t, ctx, `#destination-state`); state != "paused" {
		t.Errorf("after Pause the state is %q", state)
	}
	step(t, ctx, "resuming", chromedp.Click(chromedp.CSS(`#resume`)), chromedp.WaitVisible(chromedp.CSS(`#pause`)))
}

// TestDashboardPage: the dashboard's page, as served, names no other
// host and has no inline script; its CSP is the admin pages' with a
// style nonce that matches the page's csp-nonce and changes with every
// answer; its inline scripts are served as files.
func TestDashboardPage(t *testing.T) {
	t.Parallel()
	b := setup(t, options{token: "dash"})
	get := func(path string) (string, http.Header) {
		t.Helper()
		req, _ := http.NewRequest("GET", b.srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer dash")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
		}
		return string(body), resp.Header
	}
	var nonces []string
	for _, path := range []string{"/admin/queues/", "/admin/queues/servers"} {
		page, h := get(path)
		if strings.Contains(page, "http://") || strings.Contains(page, "https://") || strings.Contains(page, "<script>") {
			t.Errorf("%s names another host or has an inline script:\n%s", path, page)
		}
		m := regexp.MustCompile(`<meta property="csp-nonce" content="([^"]+)">`).FindStringSubmatch(page)
		csp := h.Get("Content-Security-Policy")
		if m == nil || !strings.Contains(csp, "style-src 'self' 'nonce-"+m[1]+"'; script-src 'self';") || strings.Contains(csp, "unsafe") {
			t.Fatalf("%s: nonce %v, CSP %q", path, m, csp)
		}
		nonces = append(nonces, m[1])
		for _, src := range regexp.MustCompile(`<script src="(/admin/queues/webhookd/[^"]+)">`).FindAllStringSubmatch(page, -1) {
			if js, h := get(src[1]); !strings.Contains(js, "FLAG_ROOT_PATH") && !strings.Contains(js, "webpackJsonpui") ||
				!strings.HasPrefix(h.Get("Content-Type"), "text/javascript") {
				t.Errorf("%s: %s %.80s", src[1], h.Get("Content-Type"), js)
			}
		}
	}
	if nonces[0] == nonces[1] {
		t.Errorf("two answers share the nonce %s", nonces[0])
	}
	// The API passes through untouched.
	if body, _ := get("/admin/queues/api/queues"); !strings.HasPrefix(body, `{"queues":`) {
		t.Errorf("the dashboard's API answers %.200s", body)
	}
}
