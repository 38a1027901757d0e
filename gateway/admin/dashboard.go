package admin

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynqmon"
	"github.com/redis/go-redis/v9"
)

// DashboardPath is where the Asynq dashboard is mounted.
const DashboardPath = "/admin/queues"

// dashboardScripts is where the dashboard's page finds the scripts
// asynqmon writes inline in it (the admin CSP admits no inline script).
const dashboardScripts = DashboardPath + "/webhookd/"

// asynqQueues is the Redis set of queue names Asynq keeps.
const asynqQueues = "asynq:queues"

// dashboardTabs are the task states asynqmon's queue page shows, as its
// status parameter names them.
var dashboardTabs = []string{"active", "pending", "aggregating", "scheduled", "retry", "archived", "completed"}

// sharedRedis hands asynqmon an existing client instead of letting it
// open its own pool. The handler's Close would close that client, so the
// dashboard is never closed: the process closes the client at shutdown.
type sharedRedis struct{ c redis.UniversalClient }

// MakeRedisClient implements asynq.RedisConnOpt.
func (s sharedRedis) MakeRedisClient() any { return s.c }

// dashboard is asynqmon made part of the console. Its page, as asynqmon
// renders it, loads Roboto and Material Icons from Google and runs two
// inline scripts; this handler serves it instead with Roboto from the
// binary (/admin/assets/queues.css; asynqmon draws its icons as SVG, so
// the icon font it links is never used and is dropped), its inline
// scripts as files under dashboardScripts, and webhookd's navigation. So
// the dashboard runs under the admin pages' CSP and makes no request to
// another host. Everything else (the API, the bundles, the icons) is
// asynqmon's own.
//
// One limit of asynqmon: its components (Material-UI) write their styles
// into <style> elements at run time, which style-src 'self' refuses. The
// page carries a fresh nonce per answer in the meta element those
// components read (csp-nonce), and its CSP admits styles with that nonce
// and nothing else inline (styleNonceCSP).
type dashboard struct {
	ui  http.Handler
	rdb redis.UniversalClient
	// original is asynqmon's page as it renders it; page is what is
	// served instead.
	original, page []byte
	// scripts are the page's inline scripts by path.
	scripts map[string][]byte
}

// NewDashboard returns the Asynq dashboard (asynqmon) for the queues in
// rdb's Redis database, rooted at DashboardPath. With readOnly, its API
// refuses every request that would change a queue or task.
//
// It panics if asynqmon's page is not what this version expects (a
// dependency upgrade that changed it): a test catches that, not an
// operator.
func NewDashboard(rdb redis.UniversalClient, readOnly bool) http.Handler {
	ui := asynqmon.New(asynqmon.Options{
		RootPath:     DashboardPath,
		RedisConnOpt: sharedRedis{rdb},
		ReadOnly:     readOnly,
	})
	rec := newRecorder()
	req, err := http.NewRequest(http.MethodGet, DashboardPath+"/", nil)
	if err != nil {
		panic(err) // a constant, valid URL
	}
	ui.ServeHTTP(rec, req)
	d := &dashboard{ui: ui, rdb: rdb, original: rec.body.Bytes()}
	if err := d.rewrite(); err != nil {
		panic(fmt.Sprintf("asynqmon's page: %v", err))
	}
	return d
}

var (
	// outsideStylesheet is a link to a stylesheet on another host.
	outsideStylesheet = regexp.MustCompile(`<link rel="stylesheet" href="https?://[^"]*"/?>`)
	// manifestLink links the web app manifest.
	manifestLink = regexp.MustCompile(`<link rel="manifest" href="[^"]*"/?>`)
	// inlineScript is a script element with its code inline.
	inlineScript = regexp.MustCompile(`<script>(.*?)</script>`)
)

// dashboardNav is webhookd's navigation, put on the dashboard's page.
const dashboardNav = `<nav id="webhookd-nav"><strong>webhookd</strong><a id="webhookd-events" href="/admin/events">Events</a>` +
	`<a href="/admin/view/destinations">Destinations</a><a href="/admin/view/rejected">Rejected</a><a href="/admin/view/issues">Issues</a></nav>`

// nonceSlot stands for the page's style nonce in page.
const nonceSlot = "{{nonce}}"

// rewrite makes page and scripts from original.
func (d *dashboard) rewrite() error {
	page := string(d.original)
	if n := len(outsideStylesheet.FindAllString(page, -1)); n != 2 {
		return fmt.Errorf("%d stylesheets from another host, want Google's two", n)
	}
	page = outsideStylesheet.ReplaceAllLiteralString(page, "")
	// Browsers fetch a manifest without credentials: behind the admin
	// check it can only fail, and nobody installs the dashboard as an app.
	page = manifestLink.ReplaceAllLiteralString(page, "")
	d.scripts = map[string][]byte{}
	page = inlineScript.ReplaceAllStringFunc(page, func(s string) string {
		path := dashboardScripts + "inline-" + strconv.Itoa(len(d.scripts)) + ".js"
		d.scripts[path] = []byte(inlineScript.FindStringSubmatch(s)[1])
		return `<script src="` + html.EscapeString(path) + `"></script>`
	})
	if len(d.scripts) == 0 || strings.Contains(page, "https://") || strings.Contains(page, "http://") {
		return fmt.Errorf("no inline script or a reference to another host left in %q", page)
	}
	page, ok := strings.CutSuffix(page, "</body></html>")
	if !ok || !strings.Contains(page, "</head>") {
		return fmt.Errorf("no </head> or </body></html> in %q", page)
	}
	page = strings.Replace(page, "</head>", `<link rel="stylesheet" href="/admin/assets/queues.css">`+
		`<meta property="csp-nonce" content="`+nonceSlot+`"></head>`, 1)
	d.page = []byte(page + dashboardNav + "</body></html>")
	return nil
}

// ServeHTTP serves asynqmon with its page rewritten. A queue page asked
// for with ?tab=<state> (what webhookd links and operators type) is
// redirected to asynqmon's own ?status=<state>; the dashboard's root with
// a tab goes to the first queue's page.
func (d *dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, DashboardPath+"/api/"), strings.HasPrefix(p, DashboardPath+"/static/"):
		d.ui.ServeHTTP(w, r)
		return
	case strings.HasPrefix(p, dashboardScripts):
		js, ok := d.scripts[p]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		_, _ = w.Write(js)
		return
	}
	if tab := r.URL.Query().Get("tab"); slices.Contains(dashboardTabs, tab) {
		if target := d.tabPage(r.Context(), p, tab); target != "" {
			http.Redirect(w, r, target, http.StatusFound)
			return
		}
	}
	// Anything but a file of asynqmon's is its page (it routes in the
	// browser); tell which by what it answers.
	rec := newRecorder()
	d.ui.ServeHTTP(rec, r)
	body := rec.body.Bytes()
	if bytes.Equal(body, d.original) {
		nonce := rand.Text()
		body = bytes.Replace(d.page, []byte(nonceSlot), []byte(nonce), 1)
		rec.Header().Set("Content-Type", "text/html; charset=utf-8")
		rec.Header().Set("Content-Security-Policy", styleNonceCSP(nonce))
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.code)
	_, _ = w.Write(body)
}

// tabPage returns asynqmon's address of a queue's tab for a request of
// path with ?tab=tab, or "" to serve path as it is.
func (d *dashboard) tabPage(ctx context.Context, path, tab string) string {
	rest, _ := strings.CutPrefix(path, DashboardPath)
	if queue, ok := strings.CutPrefix(rest, "/queues/"); ok && queue != "" && !strings.Contains(queue, "/") {
		return DashboardPath + "/queues/" + url.PathEscape(queue) + "?status=" + tab
	}
	if rest != "/" && rest != "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	queues, err := d.rdb.SMembers(ctx, asynqQueues).Result()
	if err != nil || len(queues) == 0 {
		return ""
	}
	slices.Sort(queues)
	return DashboardPath + "/queues/" + url.PathEscape(queues[0]) + "?status=" + tab
}

// recorder keeps an answer of asynqmon's to look at before it is sent.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func newRecorder() *recorder { return &recorder{header: http.Header{}, code: http.StatusOK} }

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(code int)        { r.code = code }
