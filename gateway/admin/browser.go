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
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway"
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
		"join": strings.Join,
		"answerBody": func(a dedupe.Answer) string {
			s := showPayload(a.Body)
			if a.Truncated {
				s += "\n… (cut at 4 KiB)"
			}
			return s
		},
		"eventURL":  func(source, id string) string { return eventPageURL("", source, id, nil) },
		"replayURL": func(source, id string) string { return eventPageURL("/replay", source, id, nil) },
	}
	pages := map[string]*template.Template{}
	for _, name := range []string{"list", "event", "login", "destinations", "refused"} {
		t := template.Must(template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html"))
		pages[name] = t
	}
	return pages
}

// eventPageURL is the event page (suffix "") or its replay form's target
// (suffix "/replay"), with query q. The source and id are path segments,
// escaped, unless one is "." or "..": a browser resolves those away as
// dot segments (also when escaped as %2E), so they go in the query of the
// routes without path parameters instead.
func eventPageURL(suffix, source, id string, q url.Values) string {
	path := "/admin/view/" + url.PathEscape(source) + "/" + url.PathEscape(id) + suffix
	if isDotSegment(source) || isDotSegment(id) {
		path = "/admin/view" + suffix
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
	Filter  dedupe.EventFilter
	Since   string
	Until   string
	Sources []string
	States  []string
	Events  []dedupe.EventSummary
	NextURL string
	Error   string
}

// browseList handles GET /admin/: the event list with filters.
func (a *Admin) browseList(c echo.Context) error {
	data := listPage{Sources: a.sources(), States: States, Since: c.QueryParam("since"), Until: c.QueryParam("until")}
	f, err := a.filterFrom(c)
	data.Filter = f
	if err != nil {
		var he *echo.HTTPError
		if errors.As(err, &he) {
			data.Error, _ = he.Message.(string)
		}
		return a.render(c, http.StatusBadRequest, "list", &data)
	}
	page, err := a.events.ListEvents(c.Request().Context(), f)
	if err != nil {
		if errors.Is(err, dedupe.ErrBadCursor) {
			data.Error = err.Error()
			return a.render(c, http.StatusBadRequest, "list", &data)
		}
		return err
	}
	data.Events = page.Events
	if page.Next != "" {
		q := c.QueryParams()
		q.Set("cursor", page.Next)
		data.NextURL = "/admin/?" + q.Encode()
	}
	return a.render(c, http.StatusOK, "list", &data)
}

type eventPage struct {
	viewer
	Event      dedupe.EventDetail
	Payload    string
	Headers    string
	Flash      string
	FlashError string
}

// flashes are the messages a replay redirect may ask the event page to
// show; the query names a key, never free text.
var flashes = map[string]string{
	"enqueued":      "Replay enqueued. Refresh to follow the run.",
	"stored_result": "The event was already delivered: the stored result stands and nothing was called.",
	"in_progress":   "A run is in progress; nothing was done.",
	"skipped_stale": "The run was skipped as stale; only a forced replay sends it.",
}

// browseEvent handles GET /admin/view/:source/:id: the event page.
func (a *Admin) browseEvent(c echo.Context) error {
	source, id, err := eventParams(c)
	if err != nil {
		return err
	}
	d, err := a.events.GetEvent(c.Request().Context(), source, id, len(a.cfg.Routes[source]), a.cfg.Routes.DestinationFilters()...)
	if err != nil {
		return httpError(err)
	}
	data := eventPage{Event: d, Payload: showPayload(d.Payload), Headers: indentJSON(gateway.MaskHeaders(d.Headers)), Flash: flashes[c.QueryParam("replayed")]}
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
	req := ReplayRequest{
		Source: source, EventID: id, Force: r.PostForm.Get("force") == "true",
		By: strings.TrimSpace(r.PostForm.Get("by")), Reason: strings.TrimSpace(r.PostForm.Get("reason")),
	}
	res, err := a.replay(c.Request().Context(), a.requestLog(c), req)
	switch {
	case errors.Is(err, ErrEnqueueFailed):
		return c.Redirect(http.StatusSeeOther, eventPageURL("", source, id, url.Values{"error": {"enqueue"}}))
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
	return c.Redirect(http.StatusSeeOther, eventPageURL("", source, id, url.Values{"replayed": {flash}}))
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
