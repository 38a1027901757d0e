package admin

import (
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/dedupe"
)

// The destination page, GET /admin/view/destinations/:source/:name: one
// destination's state (in colour), URL (credentials redacted), calls in
// flight and limits; its calls over the last hour and day from the
// attempt log (success rate, p50 and p99 duration, volume, as charts
// drawn on the server); its last failed calls; the events it has not
// delivered; and Pause or Resume.

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
}

// destinationPageURL is the page of source's destination name.
func destinationPageURL(source, name string) string {
	return "/admin/view/destinations/" + url.PathEscape(source) + "/" + url.PathEscape(name)
}

// browseDestination handles GET /admin/view/destinations/:source/:name.
func (a *Admin) browseDestination(c echo.Context) error {
	source, err := unescape(c, c.Param("source"))
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "invalid source in path")
	}
	name, err := unescape(c, c.Param("name"))
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "invalid destination in path")
	}
	ctx := c.Request().Context()
	list, listErr := a.cfg.Destinations.List(ctx)
	data := destinationPage{Flash: destinationFlashes[c.QueryParam("done")]}
	found := false
	for _, st := range list {
		if st.Source == source && st.Destination == name {
			data.Destination, found = toDestinationJSON(st), true
		}
	}
	if !found {
		return echo.NewHTTPError(http.StatusNotFound, "no destination "+name+" of source "+source)
	}
	if listErr != nil {
		data.Error = "Redis did not answer: the circuit's state and the calls in flight are unknown."
	}
	now := a.cfg.Now()
	for _, w := range []struct {
		name       string
		span, step time.Duration
	}{{"hour", time.Hour, 5 * time.Minute}, {"day", 24 * time.Hour, time.Hour}} {
		// Whole steps, so that each bar is one step of the clock.
		since := now.Add(-w.span).Truncate(w.step).Add(w.step)
		h, err := a.events.DestinationHealth(ctx, source, name, since, w.step)
		if err != nil {
			return httpError(err)
		}
		data.Windows = append(data.Windows, healthWindow{Name: w.name, Health: h, Volume: volumeChart(h), Latency: latencyChart(h)})
	}
	if data.Errors, err = a.events.RecentCallErrors(ctx, source, name, now.Add(-24*time.Hour), destinationErrorsShown); err != nil {
		return httpError(err)
	}
	if data.Affected, err = a.events.AffectedEvents(ctx, source, name, destinationAffectedShown); err != nil {
		return httpError(err)
	}
	return a.render(c, http.StatusOK, "destination", &data)
}
