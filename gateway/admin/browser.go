package admin

import (
	"bytes"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway"
	"github.com/webhookd/webhookd/jobs"
)

//go:embed templates/*.html
var templateFS embed.FS

// parsePages parses each page together with the layout.
func parsePages() map[string]*template.Template {
	funcs := template.FuncMap{
		"fmtTime": func(v any) string {
			switch t := v.(type) {
			case time.Time:
				return t.UTC().Format("2006-01-02 15:04:05")
			case *time.Time:
				if t != nil {
					return t.UTC().Format("2006-01-02 15:04:05")
				}
			}
			return ""
		},
		"join":          strings.Join,
		"shortDuration": shortDuration,
		// rel is t as a <time> the pages' script keeps current: "in 12 s",
		// "3 min ago".
		"rel": relTime,
		// inFlight says whether an event in state is still on its way:
		// its page and the list follow it (data-live).
		"inFlight":  func(state string) bool { return slices.Contains(inFlightStates, state) },
		"runResult": runResult,
		// key lets a job key break after its separators only.
		"key": func(k string) template.HTML {
			e := template.HTMLEscapeString(k)
			e = strings.ReplaceAll(e, ":", ":<wbr>")
			return template.HTML(strings.ReplaceAll(e, "#", "<wbr>#"))
		},
		"answerBody": func(a dedupe.Answer) string {
			s := showPayload(a.Body)
			if a.Truncated {
				s += "\n… (cut at 4 KiB)"
			}
			return s
		},
		"eventURL":       func(source, id string) string { return eventPageURL(source, id, nil) },
		"destinationURL": destinationPageURL,
		"replayURL":      func(source, id string) string { return replayFormURL(source, id, nil) },
	}
	pages := map[string]*template.Template{}
	for _, name := range []string{"list", "event", "bulk", "login", "destinations", "destination", "refused", "rejected", "issues", "issue"} {
		t := template.Must(template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html"))
		pages[name] = t
	}
	return pages
}

// fromNow says when t is from now, in words: "in 12 s", "3 min ago".
func fromNow(t *time.Time) string {
	if t == nil {
		return ""
	}
	d := time.Until(*t)
	s := durationWords(d.Abs())
	if d >= 0 {
		return "in " + s
	}
	return s + " ago"
}

// relTime renders t (a time.Time or *time.Time) as a <time> element
// saying when it is from now; admin.js keeps the words current.
func relTime(v any) template.HTML {
	var t time.Time
	switch x := v.(type) {
	case time.Time:
		t = x
	case *time.Time:
		if x == nil {
			return ""
		}
		t = *x
	}
	if t.IsZero() {
		return ""
	}
	return template.HTML(`<time class="rel" datetime="` + t.UTC().Format(time.RFC3339) + `" title="` +
		t.UTC().Format("2006-01-02 15:04:05") + ` UTC">` + template.HTMLEscapeString(fromNow(&t)) + `</time>`)
}

// inFlightStates are the event states on the way to an end: a page
// showing one follows it.
var inFlightStates = []string{dedupe.ShownRetrying, dedupe.ShownHeld, dedupe.StatusRunning, dedupe.StateQueued, dedupe.StateReceived}

// eventPageURL is the event's one URL, /admin/events/:source/:id (a page
// for a browser, JSON for an API client), with query q. The source and id
// are path segments, escaped, unless one is "." or "..": a browser
// resolves those away as dot segments (also when escaped as %2E), so they
// go in the query of /admin/view instead.
func eventPageURL(source, id string, q url.Values) string {
	return dotSafeURL("/admin/events/", "/admin/view", "", source, id, q)
}

// replayFormURL is the target of the event page's replay forms.
func replayFormURL(source, id string, q url.Values) string {
	return dotSafeURL("/admin/view/", "/admin/view", "/replay", source, id, q)
}

// dotSafeURL is prefix<source>/<id>suffix, escaped, or, when either is a
// dot segment, dotPath+suffix with source and id in the query.
func dotSafeURL(prefix, dotPath, suffix, source, id string, q url.Values) string {
	path := prefix + url.PathEscape(source) + "/" + url.PathEscape(id) + suffix
	if isDotSegment(source) || isDotSegment(id) {
		path = dotPath + suffix
		q = maps.Clone(q)
		if q == nil {
			q = url.Values{}
		}
		q.Set("source", source)
		q.Set("id", id)
	}
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

func isDotSegment(s string) bool { return s == "." || s == ".." }

// viewer is what every page knows about who looks at it; each page's data
// embeds it and render fills it in.
type viewer struct {
	// ReadOnly is true for a read-only session: the page hides replay,
	// pause and resume.
	ReadOnly bool
}

func (v *viewer) setViewer(x viewer) { *v = x }

// pageData is a page's data: a pointer to a struct embedding viewer.
type pageData interface{ setViewer(viewer) }

// render writes page with data, telling it who looks.
func (a *Admin) render(c echo.Context, code int, page string, data pageData) error {
	data.setViewer(viewer{ReadOnly: roleOf(c) == roleReadOnly})
	var buf bytes.Buffer
	if err := a.pages[page].ExecuteTemplate(&buf, "layout", data); err != nil {
		return err
	}
	return c.HTMLBlob(code, buf.Bytes())
}

type listPage struct {
	viewer
	Filter      filterInput
	Sources     []string
	Dests       []string
	States      []string
	RunStatuses []string
	Events      []dedupe.EventSummary
	// Total is the count of matching events ("10,000+" past the cap).
	Total string
	// NewestURL, PrevURL and NextURL page the list: the first page,
	// newer events, older events.
	NewestURL, PrevURL, NextURL string
	// BulkURL previews a bulk replay of the filter.
	BulkURL string
	// UntilExample is the Until field's placeholder: this hour, as the
	// field takes it.
	UntilExample string
	Error        string
}

// browseList handles GET /admin/ and a browser's GET /admin/events: the
// event list with search and filters.
func (a *Admin) browseList(c echo.Context) error {
	data := listPage{Sources: a.sources(), Dests: a.destinationNames(), States: States, RunStatuses: RunStatuses,
		UntilExample: a.cfg.Now().UTC().Truncate(time.Hour).Format("2006-01-02T15:04")}
	in, f, err := a.filterFrom(c)
	data.Filter = in
	if err != nil {
		data.Error = errorText(err)
		return a.render(c, http.StatusBadRequest, "list", &data)
	}
	ctx := c.Request().Context()
	page, err := a.events.ListEvents(ctx, f)
	if err == nil {
		var n dedupe.EventCount
		if n, err = a.events.CountEvents(ctx, f); err == nil {
			data.Total = countText(n)
		}
	}
	if err != nil {
		he, ok := httpError(err).(*echo.HTTPError)
		if !ok {
			return err
		}
		data.Error = errorText(he)
		return a.render(c, he.Code, "list", &data)
	}
	data.Events = page.Events
	q := in.values()
	if l := c.QueryParam("limit"); l != "" {
		q.Set("limit", l)
	}
	listURL := func(cursor string) string {
		v := maps.Clone(q)
		if cursor != "" {
			v.Set("cursor", cursor)
		}
		if len(v) == 0 {
			return "/admin/events"
		}
		return "/admin/events?" + v.Encode()
	}
	if page.Next != "" {
		data.NextURL = listURL(page.Next)
	}
	if page.Prev != "" {
		data.PrevURL = listURL(page.Prev)
	}
	if f.Cursor != "" {
		data.NewestURL = listURL("")
	}
	data.BulkURL = "/admin/view/bulk-replay"
	if v := in.values(); len(v) > 0 {
		data.BulkURL += "?" + v.Encode()
	}
	return a.render(c, http.StatusOK, "list", &data)
}

// errorText is an error's message for a page.
func errorText(err error) string {
	var he *echo.HTTPError
	if errors.As(err, &he) {
		if m, ok := he.Message.(string); ok {
			return m
		}
	}
	return err.Error()
}

// countText shows a count: "1,234", or "10,000+" when the count stopped
// at its cap.
func countText(n dedupe.EventCount) string {
	s := strconv.FormatInt(n.Matched, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if !n.Complete {
		s += "+"
	}
	return s
}

type eventPage struct {
	viewer
	Event dedupe.EventDetail
	// Destinations are the source's configured destinations, offered
	// by the force replay.
	Destinations []string
	Payload      string
	// Headers are the stored headers, one row per value, by name;
	// RawHeaders is what was stored when it is not a JSON object of
	// arrays of strings.
	Headers    []headerRow
	RawHeaders string
	// Attempts are the event's attempt log, each call marked when it
	// came of a replay.
	Attempts []attemptRow
	// TraceID is the event's trace, when recorded with tracing on.
	TraceID    string
	Flash      string
	FlashError string
}

// flashes are the messages a replay redirect may ask the event page to
// show; the query names a key, never free text.
var flashes = map[string]string{
	"enqueued":      "Replay enqueued; this page follows the run.",
	"stored_result": "The event was already delivered: the stored result stands and nothing was called.",
	"in_progress":   "A run is in progress; nothing was done.",
	"skipped_stale": "The run was skipped as stale; only a forced replay sends it.",
}

// redirectToEvent handles GET /admin/view/:source/:id, the event page's
// old address: it moved to the event's one URL.
func (a *Admin) redirectToEvent(c echo.Context) error {
	source, id, err := eventParams(c)
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusMovedPermanently, eventPageURL(source, id, c.QueryParams()))
}

// browseEvent handles a browser's GET /admin/events/:source/:id and GET
// /admin/view?source=&id= (dot segments): the event page.
func (a *Admin) browseEvent(c echo.Context) error {
	source, id, err := eventParams(c)
	if err != nil {
		return err
	}
	d, err := a.eventDetail(c.Request().Context(), source, id)
	if err != nil {
		return httpError(err)
	}
	dests, _ := a.routes().DestinationNames(source)
	data := eventPage{Event: d, Destinations: dests, Payload: showPayload(d.Payload), TraceID: traceID(d.TraceParent),
		Attempts: markReplays(d.Attempts), Flash: flashes[c.QueryParam("replayed")]}
	data.Headers, data.RawHeaders = headerRows(gateway.MaskHeaders(d.Headers, a.gatewaySources()[source].SignatureHeader))
	if c.QueryParam("error") != "" {
		data.FlashError = "The replay was recorded but could not be enqueued (is Redis up?). Replay again without force."
	}
	return a.render(c, http.StatusOK, "event", &data)
}

// browseReplay handles the event page's Replay forms and redirects back
// to the page (303), which shows what happened.
func (a *Admin) browseReplay(c echo.Context) error {
	source, id, err := eventParams(c)
	if err != nil {
		return err
	}
	r := c.Request()
	if err := parseForm(r); err != nil {
		return err
	}
	req := jobs.ReplayRequest{
		Source: source, EventID: id, Force: r.PostForm.Get("force") == "true", Destination: r.PostForm.Get("destination"),
		By: strings.TrimSpace(r.PostForm.Get("by")), Reason: strings.TrimSpace(r.PostForm.Get("reason")),
	}
	res, err := a.replay(c.Request().Context(), a.requestLog(c), req)
	switch {
	case errors.Is(err, jobs.ErrEnqueueFailed):
		return c.Redirect(http.StatusSeeOther, eventPageURL(source, id, url.Values{"error": {"enqueue"}}))
	case err != nil:
		return httpError(err)
	}
	flash := "in_progress"
	if res.Enqueued {
		flash = "enqueued"
	} else {
		for _, r := range res.Runs {
			flash = r.Action
		}
	}
	return c.Redirect(http.StatusSeeOther, eventPageURL(source, id, url.Values{"replayed": {flash}}))
}

// showPayload renders a body for the page: indented JSON, text as is,
// binary as base64.
func showPayload(b []byte) string {
	if json.Valid(b) {
		return indentJSON(b)
	}
	if utf8.Valid(b) {
		return string(b)
	}
	return "(binary, base64) " + base64.StdEncoding.EncodeToString(b)
}

// headerRow is one stored header value.
type headerRow struct{ Name, Value string }

// headerRows lists stored headers (a JSON object of arrays of values) as
// name: value rows, names sorted; headers that are not such an object
// come back as indented text instead.
func headerRows(b []byte) ([]headerRow, string) {
	var h map[string][]string
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, indentJSON(b)
	}
	var rows []headerRow
	for _, name := range slices.Sorted(maps.Keys(h)) {
		for _, v := range h[name] {
			rows = append(rows, headerRow{Name: name, Value: v})
		}
	}
	return rows, ""
}

// attemptRow is a call of the attempt log and, when it is the first call
// after a replay, how it came: "replay" (the same key, after the run had
// failed for good or died) or "forced replay #N" (a new generation).
type attemptRow struct {
	dedupe.Attempt
	Replay string
}

// markReplays marks the calls a replay made. The attempt log keeps no
// replay of its own; a call is a replay's when it is the first of a
// generation past 1, or when the call of the same key before it ended
// the run (a permanent failure, or a failure with no try left).
func markReplays(attempts []dedupe.Attempt) []attemptRow {
	last := map[string]dedupe.Attempt{}
	rows := make([]attemptRow, len(attempts))
	for i, at := range attempts {
		rows[i].Attempt = at
		prev, seen := last[at.Key]
		switch {
		case !seen:
			if _, gen, ok := strings.Cut(at.Key, "#"); ok {
				rows[i].Replay = "forced replay #" + gen
			}
		case prev.Outcome == string(dedupe.OutcomePermanent),
			prev.Outcome == string(dedupe.OutcomeRetry) && prev.RetryAt == nil:
			rows[i].Replay = "replay"
		}
		last[at.Key] = at
	}
	return rows
}

// runResult shows a run's stored result as indented JSON, with any
// string in it that holds a JSON object or array (the destination's
// body, kept as text) shown as that JSON, not as an escaped string.
func runResult(b []byte) string {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return showPayload(b)
	}
	out, err := json.MarshalIndent(unwrapJSONStrings(v), "", "  ")
	if err != nil {
		return showPayload(b)
	}
	return string(out)
}

// unwrapJSONStrings returns v with each string that holds a JSON object
// or array replaced by its value, at any depth.
func unwrapJSONStrings(v any) any {
	switch x := v.(type) {
	case string:
		t := strings.TrimSpace(x)
		var inner any
		if (strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[")) && json.Unmarshal([]byte(t), &inner) == nil {
			return unwrapJSONStrings(inner)
		}
	case map[string]any:
		for k, e := range x {
			x[k] = unwrapJSONStrings(e)
		}
	case []any:
		for i, e := range x {
			x[i] = unwrapJSONStrings(e)
		}
	}
	return v
}

func indentJSON(b []byte) string {
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return string(b)
	}
	return out.String()
}

type loginPage struct {
	viewer
	Next    string
	Message string
}

// refusedPage says why admin refused a browser's request.
type refusedPage struct {
	viewer
	// Off is true when admin is off (no token configured): the page says
	// how to turn it on.
	Off     bool
	Message string
}

// durationWords writes d for people, to the unit that matters: "12 s",
// "4 min", "3 h", "2 d".
func durationWords(d time.Duration) string {
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d.Round(time.Second)/time.Second)) + " s"
	case d < time.Hour:
		return strconv.Itoa(int(d.Round(time.Minute)/time.Minute)) + " min"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d.Round(time.Hour)/time.Hour)) + " h"
	}
	return strconv.Itoa(int(d/(24*time.Hour))) + " d"
}
