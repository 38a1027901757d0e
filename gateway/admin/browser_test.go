package admin_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
)

// chromiumPath finds Chromium: $CHROMIUM, /usr/bin/chromium, or PATH. The
// test fails (never skips) without it, saying how to install it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("CHROMIUM"), "/usr/bin/chromium"} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	t.Fatalf("the event browser test needs headless Chromium at /usr/bin/chromium (or $CHROMIUM): install it with apt-get install -y chromium")
	return ""
}

// newBrowser starts headless Chromium for the test and accepts every
// JavaScript dialog (the force replay's confirmation), counting them in
// dialogs.
func newBrowser(t *testing.T, dialogs *atomic.Int64) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1400, 1000),
		chromedp.UserDataDir(t.TempDir()),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	opening := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range opening {
			if err != nil {
				return
			}
			dialogs.Add(1)
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	return ctx
}

// step runs actions with a deadline (the browser itself lives as long as
// the test).
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// text reads the text of the element sel.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(sctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("reading %s: %v", sel, err)
	}
	return s
}

func TestBrowserReplayFailedEvent(t *testing.T) {
	t.Parallel()
	var dialogs atomic.Int64
	ctx := newBrowser(t, &dialogs)
	b := setup(t, options{token: "browser-token"})

	b.send(t, "evt_ok")
	b.waitState(t, "evt_ok", dedupe.StatusDone)
	b.dest.setStatus(http.StatusBadRequest)
	key := b.send(t, "evt_broken")
	b.waitState(t, "evt_broken", dedupe.StatusFailed)
	b.dest.setStatus(http.StatusOK)

	// Sign in with the token; the session cookie covers the rest.
	step(t, ctx, "signing in",
		chromedp.Navigate(b.srv.URL+"/admin/login?next=/admin/"),
		chromedp.WaitVisible(chromedp.CSS(`input[name=token]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=token]`), "browser-token"),
		chromedp.Submit(chromedp.CSS(`input[name=token]`)),
		chromedp.WaitVisible(chromedp.CSS(`#events`)),
	)
	// The page's own stylesheet applies under its Content-Security-Policy.
	if bg := evaluate(t, ctx, `getComputedStyle(document.querySelector("header")).backgroundColor`); bg != "rgb(29, 35, 48)" {
		t.Errorf("header background %q: the stylesheet did not load", bg)
	}
	list := text(t, ctx, `#events`)
	if !strings.Contains(list, "evt_ok") || !strings.Contains(list, "evt_broken") || !strings.Contains(list, "failed") {
		t.Fatalf("event list does not show both events and the failed state:\n%s", list)
	}

	// Filter by state, then open the failed event.
	step(t, ctx, "filtering by state",
		chromedp.SetValue(chromedp.CSS(`#filter-state`), "failed"),
		chromedp.Submit(chromedp.CSS(`#filter-state`)),
		chromedp.WaitVisible(chromedp.CSS(`a.event-link`)),
	)
	if filtered := text(t, ctx, `#events`); strings.Contains(filtered, "evt_ok") || !strings.Contains(filtered, "evt_broken") {
		t.Fatalf("state=failed filter shows:\n%s", filtered)
	}
	step(t, ctx, "opening the event",
		chromedp.Click(chromedp.CSS(`a.event-link`)),
		chromedp.WaitVisible(chromedp.CSS(`#replay`)),
	)
	if runs := text(t, ctx, `#runs`); !strings.Contains(runs, key) || !strings.Contains(runs, "HTTP 400") {
		t.Fatalf("event page does not show the failed run:\n%s", runs)
	}

	// Replay: the destination receives the call with the same key.
	step(t, ctx, "clicking Replay",
		chromedp.SendKeys(chromedp.CSS(`#replay-form input[name=by]`), "browser-test"),
		chromedp.Click(chromedp.CSS(`#replay`)),
		chromedp.WaitVisible(chromedp.CSS(`#flash`)),
	)
	if flash := text(t, ctx, `#flash`); !strings.Contains(flash, "enqueued") {
		t.Errorf("flash after replay: %q", flash)
	}
	pipelinetest.Eventually(t, 20*time.Second, "the replayed call", func() bool { return b.dest.calls(key) == 2 })
	b.waitState(t, "evt_broken", dedupe.StatusDone)

	step(t, ctx, "reloading the event", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#event-state`)))
	state, attempts := text(t, ctx, `#event-state`), text(t, ctx, `#attempts`)
	if state != dedupe.StatusDone || !strings.Contains(attempts, "400") || !strings.Contains(attempts, "200") {
		t.Errorf("after replay: state %q, attempts\n%s", state, attempts)
	}
	// The replay's call is marked so in the attempt log; the first is not.
	if marks := evaluate(t, ctx, `[...document.querySelectorAll("#attempts tr.attempt-row")].map(r => r.querySelector(".replay-mark") ? r.querySelector(".replay-mark").textContent : "-").join(",")`); marks != "-,replay" {
		t.Errorf("replay marks in the attempt log: %q, want -,replay", marks)
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	shot, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	cancel()
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	saveScreenshot(t, "event-browser.png", shot)

	// Force replay names its destination, sits behind a confirmation
	// and makes generation #2.
	step(t, ctx, "clicking Force replay",
		chromedp.SetValue(chromedp.CSS(`#force-destination`), destName),
		chromedp.SendKeys(chromedp.CSS(`#force-form input[name=reason]`), "resend for the customer"),
		chromedp.Click(chromedp.CSS(`#force-replay`)),
		chromedp.WaitVisible(chromedp.CSS(`#flash`)),
	)
	pipelinetest.Eventually(t, 20*time.Second, "the forced #2 call", func() bool { return b.dest.calls(key+"#2") == 1 })
	if n := dialogs.Load(); n != 1 {
		t.Errorf("%d confirmation dialogs for the force replay, want 1 (the page's script must run under its CSP)", n)
	}

	// Signing out ends the session: the next page asks for the token.
	step(t, ctx, "signing out",
		chromedp.Click(chromedp.CSS(`#sign-out`)),
		chromedp.WaitVisible(chromedp.CSS(`input[name=token]`)),
		chromedp.Navigate(b.srv.URL+"/admin/"),
		chromedp.WaitVisible(chromedp.CSS(`input[name=token]`)),
	)
}

// TestBrowserDotIDs: events whose ids are "." and ".." open from the
// list and replay from their page, although a browser resolves such path
// segments away.
func TestBrowserDotIDs(t *testing.T) {
	t.Parallel()
	var dialogs atomic.Int64
	ctx := newBrowser(t, &dialogs)
	b := setup(t, options{token: "dots"})
	for _, id := range []string{".", ".."} {
		b.send(t, id)
		b.waitState(t, id, dedupe.StatusDone)
	}
	step(t, ctx, "signing in",
		chromedp.Navigate(b.srv.URL+"/admin/login?next=/admin/"),
		chromedp.WaitVisible(chromedp.CSS(`input[name=token]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=token]`), "dots"),
		chromedp.Submit(chromedp.CSS(`input[name=token]`)),
		chromedp.WaitVisible(chromedp.CSS(`#events`)),
	)
	for _, id := range []string{".", ".."} {
		step(t, ctx, "opening event "+id,
			chromedp.Navigate(b.srv.URL+"/admin/"),
			chromedp.Click(chromedp.Search(`//a[contains(@class,"event-link") and text()="`+id+`"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#replay`)),
		)
		if h := text(t, ctx, `h1`); !strings.Contains(h, "stripe / "+id+" ") {
			t.Errorf("event page for %q shows %q", id, h)
		}
		step(t, ctx, "replaying event "+id,
			chromedp.Click(chromedp.CSS(`#replay`)),
			chromedp.WaitVisible(chromedp.CSS(`#flash`)),
		)
		if flash := text(t, ctx, `#flash`); !strings.Contains(flash, "already delivered") {
			t.Errorf("replay of %q: flash %q, want the stored result", id, flash)
		}
		if h := text(t, ctx, `h1`); !strings.Contains(h, "stripe / "+id+" ") {
			t.Errorf("after the replay of %q the page shows %q", id, h)
		}
	}
}

// evaluate returns the string value of a JavaScript expression on the
// current page.
func evaluate(t *testing.T, ctx context.Context, expr string) string {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := chromedp.Run(sctx, chromedp.Evaluate[string](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return out
}

// saveScreenshot keeps the screenshot under the test's temp dir, and also
// under $WEBHOOKD_SCREENSHOT_DIR when set (to refresh docs/).
func saveScreenshot(t *testing.T, name string, png []byte) {
	t.Helper()
	dirs := []string{t.TempDir()}
	if d := os.Getenv("WEBHOOKD_SCREENSHOT_DIR"); d != "" {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Errorf("saving screenshot: %v", err)
			continue
		}
		t.Logf("screenshot: %s", p)
	}
}

// TestBrowserAttemptAnswers: a failing destination's answer (its body and
// headers of note) and the event's type are in the admin API's event
// detail and visible on the event page.
func TestBrowserAttemptAnswers(t *testing.T) {
	t.Parallel()
	var dialogs atomic.Int64
	ctx := newBrowser(t, &dialogs)
	b := setup(t, options{token: "browser-token"})

	b.dest.setAnswer(http.StatusBadRequest, http.Header{"X-Request-Id": {"req-7f3a"}, "Content-Type": {"application/json"}, "X-Secret-Ish": {"not kept"}},
		`{"error":"customer_missing"}`)
	b.send(t, "evt_refused")
	b.waitState(t, "evt_refused", dedupe.StatusFailed)

	var detail struct {
		EventType string `json:"event_type"`
		Attempts  []struct {
			StatusCode    int               `json:"status_code"`
			AnswerHeaders map[string]string `json:"answer_headers"`
			AnswerBody    string            `json:"answer_body"`
		} `json:"attempts"`
	}
	b.token = "browser-token"
	if code := b.do(t, http.MethodGet, "/admin/events/stripe/evt_refused", "", &detail); code != http.StatusOK {
		t.Fatalf("event detail: %d", code)
	}
	if detail.EventType != "invoice.paid" || len(detail.Attempts) != 1 {
		t.Fatalf("detail: type %q, %d attempts; want invoice.paid and 1", detail.EventType, len(detail.Attempts))
	}
	at := detail.Attempts[0]
	if at.StatusCode != 400 || at.AnswerBody != `{"error":"customer_missing"}` || at.AnswerHeaders["X-Request-Id"] != "req-7f3a" ||
		at.AnswerHeaders["Content-Type"] != "application/json" || at.AnswerHeaders["X-Secret-Ish"] != "" {
		t.Errorf("attempt as the API shows it: %+v", at)
	}

	step(t, ctx, "signing in",
		chromedp.Navigate(b.srv.URL+"/admin/login?next=/admin/"),
		chromedp.WaitVisible(chromedp.CSS(`input[name=token]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=token]`), "browser-token"),
		chromedp.Submit(chromedp.CSS(`input[name=token]`)),
		chromedp.WaitVisible(chromedp.CSS(`#events`)),
		chromedp.Click(chromedp.CSS(`a.event-link`)),
		chromedp.WaitVisible(chromedp.CSS(`#attempts`)),
	)
	attempts := text(t, ctx, `#attempts`)
	for _, want := range []string{"400", "customer_missing", "X-Request-Id", "req-7f3a"} {
		if !strings.Contains(attempts, want) {
			t.Errorf("event page's attempts do not show %q:\n%s", want, attempts)
		}
	}
	if typ := text(t, ctx, `#event-type`); typ != "invoice.paid" {
		t.Errorf("event page's type: %q, want invoice.paid", typ)
	}
}
