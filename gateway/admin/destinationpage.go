package admin

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/jobs"
)

// The destination page, GET /admin/view/destinations/:source/:name: one
// destination's state (in colour), URL (credentials redacted), calls in
// flight and limits; its calls over the last hour and day from the
// attempt log (success rate, p50 and p99 duration, volume, as charts
// drawn on the server); its last failed calls; the events it has not
// delivered; Pause or Resume; and Send test event (jobs.TestSender: one
// call with a synthetic event and a key of its own, recorded nowhere,
// its answer shown on the page).

// Bounds of the destination page.
const (
	destinationErrorsShown   = 10
	destinationAffectedShown = 20
)

// healthWindow is one window of calls the page shows.
type healthWindow struct {
	// Name is "hour" or "day" (the ids of its figures).
	Name   string
	Health dedupe.DestinationHealth
	// Volume and Latency are its charts.
	Volume, Latency template.HTML
}

// Rate is the window's success rate as a percentage, "—" without calls.
func (w healthWindow) Rate() string {
	if w.Health.Calls == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f %%", 100*w.Health.SuccessRate())
}

// destinationPage is the page of one destination.
type destinationPage struct {
	viewer
	Destination DestinationJSON
	Windows     []healthWindow
	Errors      []dedupe.CallError
	Affected    []dedupe.AffectedEvent
	Flash       string
	Error       string
	// Test is the test event just sent, if any.
	Test *TestEventJSON
	// CanTest is true when test events can be sent.
	CanTest bool
}

// destinationPageURL is the page of source's destination name.
func destinationPageURL(source, name string) string {
	return "/admin/view/destinations/" + url.PathEscape(source) + "/" + url.PathEscape(name)
}

// destinationParams reads a destination route's :source and :name.
func destinationParams(c echo.Context) (source, name string, err error) {
	if source, err = unescape(c, c.Param("source")); err != nil {
		return "", "", echo.NewHTTPError(http.StatusBadRequest, "invalid source in path")
	}
	if name, err = unescape(c, c.Param("name")); err != nil {
		return "", "", echo.NewHTTPError(http.StatusBadRequest, "invalid destination in path")
	}
	return source, name, nil
}

// browseDestination handles GET /admin/view/destinations/:source/:name.
func (a *Admin) browseDestination(c echo.Context) error {
	source, name, err := destinationParams(c)
	if err != nil {
		return err
	}
	data := destinationPage{Flash: destinationFlashes[c.QueryParam("done")]}
	return a.renderDestination(c, source, name, &data)
}

// renderDestination fills in and renders the page of source's
// destination name.
func (a *Admin) renderDestination(c echo.Context, source, name string, data *destinationPage) error {
	ctx := c.Request().Context()
	list, listErr := a.cfg.Destinations.List(ctx)
	var err error
	found := false
	for _, st := range list {
		if st.Source == source && st.Destination == name {
			data.Destination, found = toDestinationJSON(st), true
		}
	}
	data.CanTest = a.cfg.TestEvents != nil
	if !found {
		return echo.NewHTTPError(http.StatusNotFound, "no destination "+name+" of source "+source)
	}
	if listErr != nil {
		data.Error = "Redis did not answer: the circuit's state and the calls in flight are unknown."
	}
	now, keys := a.cfg.Now(), jobs.KeyPrefix(source, name)
	for _, w := range []struct {
		name       string
		span, step time.Duration
	}{{"hour", time.Hour, 5 * time.Minute}, {"day", 24 * time.Hour, time.Hour}} {
		// Whole steps, so that each bar is one step of the clock.
		since := now.Add(-w.span).Truncate(w.step).Add(w.step)
		h, err := a.events.DestinationHealth(ctx, keys, since, w.step)
		if err != nil {
			return httpError(err)
		}
		data.Windows = append(data.Windows, healthWindow{Name: w.name, Health: h, Volume: volumeChart(h), Latency: latencyChart(h)})
	}
	if data.Errors, err = a.events.RecentCallErrors(ctx, keys, now.Add(-24*time.Hour), destinationErrorsShown); err != nil {
		return httpError(err)
	}
	if data.Affected, err = a.events.AffectedEvents(ctx, keys, now.Add(-24*time.Hour), destinationAffectedShown); err != nil {
		return httpError(err)
	}
	return a.render(c, http.StatusOK, "destination", data)
}

// testEventSender sends test events; *jobs.TestSender satisfies it.
type testEventSender interface {
	Send(ctx context.Context, source, destination, by string) (jobs.TestResult, error)
}

// TestEventJSON is POST /admin/destinations/:source/:name/test's answer.
type TestEventJSON struct {
	EventID    string  `json:"event_id"`
	Key        string  `json:"key"`
	Delivered  bool    `json:"delivered"`
	StatusCode int     `json:"status_code,omitempty"`
	Error      string  `json:"error,omitempty"`
	DurationMS float64 `json:"duration_ms"`
	AnswerBody string  `json:"answer_body,omitempty"`
}

// sendTestEvent sends source's destination name a test event for the
// request (its by: the form's or the JSON body's, else "admin").
func (a *Admin) sendTestEvent(c echo.Context, source, name, by string) (TestEventJSON, error) {
	if by == "" {
		by = "admin"
	}
	if err := checkText(textInput{"by", by, maxNameBytes}); err != nil {
		return TestEventJSON{}, err
	}
	res, err := a.cfg.TestEvents.Send(c.Request().Context(), source, name, by)
	if err != nil {
		if errors.Is(err, jobs.ErrUnknownSource) || errors.Is(err, jobs.ErrUnknownDestination) {
			return TestEventJSON{}, echo.NewHTTPError(http.StatusNotFound, err.Error())
		}
		return TestEventJSON{}, err
	}
	return TestEventJSON{
		EventID: res.EventID, Key: res.Key, Delivered: res.Delivered, StatusCode: res.StatusCode, Error: res.Error,
		DurationMS: float64(res.Duration.Microseconds()) / 1000, AnswerBody: answerText(res.Answer),
	}, nil
}

// answerText is an answer's body as the pages show it.
func answerText(a dedupe.Answer) string {
	if len(a.Body) == 0 {
		return ""
	}
	return showPayload(a.Body)
}

// testDestination handles POST /admin/destinations/:source/:name/test.
func (a *Admin) testDestination(c echo.Context) error {
	source, name, err := destinationParams(c)
	if err != nil {
		return err
	}
	var in steerInput
	if err := bindJSONBody(c, &in); err != nil {
		return err
	}
	out, err := a.sendTestEvent(c, source, name, strings.TrimSpace(in.By))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// browseTestDestination handles the page's Send test event form: the
// page again, with what the call came to (nothing is stored to redirect
// to).
func (a *Admin) browseTestDestination(c echo.Context) error {
	source, name, err := destinationParams(c)
	if err != nil {
		return err
	}
	if err := parseForm(c.Request()); err != nil {
		return err
	}
	out, err := a.sendTestEvent(c, source, name, strings.TrimSpace(c.Request().PostForm.Get("by")))
	if err != nil {
		return err
	}
	return a.renderDestination(c, source, name, &destinationPage{Test: &out})
}
