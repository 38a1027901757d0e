package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/textfield"
	"github.com/webhookd/webhookd/jobs"
)

// destinationControl is what the destination routes need;
// *jobs.Destinations satisfies it.
type destinationControl interface {
	List(ctx context.Context) ([]jobs.DestinationStatus, error)
	Pause(ctx context.Context, source, destination, by, reason string) (jobs.DestinationStatus, error)
	Resume(ctx context.Context, source, destination, by string) (jobs.DestinationStatus, error)
	Held() []dedupe.HeldDestination
}

// DestinationJSON is one destination in the API (GET /admin/destinations).
type DestinationJSON struct {
	Source              string     `json:"source"`
	Destination         string     `json:"destination"`
	State               string     `json:"state"`
	InFlight            int        `json:"in_flight"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	LastFailure         *time.Time `json:"last_failure,omitempty"`
	PausedAt            *time.Time `json:"paused_at,omitempty"`
	PausedBy            string     `json:"paused_by,omitempty"`
	PauseReason         string     `json:"pause_reason,omitempty"`
	Concurrency         int        `json:"concurrency,omitempty"`
	RateLimit           string     `json:"rate_limit,omitempty"`
	CircuitFailures     int        `json:"circuit_failures"`
	CircuitCooldown     string     `json:"circuit_cooldown,omitempty"`
	// FairBy is the field whose values (tenants) share the concurrency,
	// and FairValues how many of them are active now.
	FairBy     string `json:"fair_by,omitempty"`
	FairValues int    `json:"fair_values,omitempty"`
	// URL is where calls go, credentials redacted.
	URL string `json:"url"`
}

func toDestinationJSON(st jobs.DestinationStatus) DestinationJSON {
	out := DestinationJSON{
		Source: st.Source, Destination: st.Destination, URL: st.URL, State: st.State, InFlight: st.InFlight,
		ConsecutiveFailures: st.ConsecutiveFailures, Concurrency: st.Concurrency, RateLimit: st.Rate,
		CircuitFailures: st.Circuit.Failures, FairBy: st.FairBy, FairValues: st.FairValues,
	}
	if st.Circuit.Failures > 0 {
		out.CircuitCooldown = shortDuration(st.Circuit.Cooldown)
	}
	if !st.LastFailure.IsZero() {
		out.LastFailure = &st.LastFailure
	}
	if p := st.Pause; p != nil {
		out.PausedAt, out.PausedBy, out.PauseReason = &p.PausedAt, p.PausedBy, p.Reason
	}
	return out
}

// DestinationListJSON is GET /admin/destinations's answer.
type DestinationListJSON struct {
	Destinations []DestinationJSON `json:"destinations"`
}

// listDestinations handles GET /admin/destinations. Redis failing to
// answer still lists every destination, with what Postgres knows (the
// pauses) and state "unknown".
func (a *Admin) listDestinations(c echo.Context) error {
	list, err := a.cfg.Destinations.List(c.Request().Context())
	if err != nil {
		a.requestLog(c).WarnContext(c.Request().Context(), "destination states unknown: Redis did not answer", "error", err.Error())
	}
	out := make([]DestinationJSON, 0, len(list))
	for _, st := range list {
		out = append(out, toDestinationJSON(st))
	}
	return c.JSON(http.StatusOK, DestinationListJSON{Destinations: out})
}

// steerInput is the optional JSON body of a pause or resume.
type steerInput struct {
	By     string `json:"by"`
	Reason string `json:"reason"`
}

// steerDestination handles POST /admin/destinations/:source/:name/pause
// and …/resume.
func (a *Admin) steerDestination(pause bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		source, err := unescape(c, c.Param("source"))
		if err != nil {
			return echo.NewHTTPError(http.StatusBadRequest, "invalid source in path")
		}
		name, err := unescape(c, c.Param("name"))
		if err != nil {
			return echo.NewHTTPError(http.StatusBadRequest, "invalid destination in path")
		}
		var in steerInput
		if err := bindJSONBody(c, &in); err != nil {
			return err
		}
		st, err := a.steer(c, pause, source, name, in)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, toDestinationJSON(st))
	}
}

// steer validates a pause or resume and does it.
func (a *Admin) steer(c echo.Context, pause bool, source, name string, in steerInput) (jobs.DestinationStatus, error) {
	in.By, in.Reason = strings.TrimSpace(in.By), strings.TrimSpace(in.Reason)
	if in.By == "" {
		in.By = "admin"
	}
	for field, v := range map[string]string{"source": source, "destination": name, "by": in.By, "reason": in.Reason} {
		if err := textfield.CheckLine(v, 512); err != nil {
			return jobs.DestinationStatus{}, echo.NewHTTPError(http.StatusBadRequest, field+": "+err.Error())
		}
	}
	ctx := c.Request().Context()
	var (
		st  jobs.DestinationStatus
		err error
	)
	if pause {
		st, err = a.cfg.Destinations.Pause(ctx, source, name, in.By, in.Reason)
	} else {
		st, err = a.cfg.Destinations.Resume(ctx, source, name, in.By)
	}
	if errors.Is(err, jobs.ErrUnknownDestination) {
		return st, echo.NewHTTPError(http.StatusNotFound, err.Error())
	}
	return st, err
}

// bindJSONBody decodes an optional JSON body into dst: no body is fine,
// a body that is not JSON is 415 (never taken as empty), JSON that does
// not fit dst is 400.
func bindJSONBody(c echo.Context, dst any) error {
	r := c.Request()
	if r.ContentLength == 0 && r.Header.Get(echo.HeaderContentType) == "" {
		return nil
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get(echo.HeaderContentType)); err != nil || mt != echo.MIMEApplicationJSON {
		return echo.NewHTTPError(http.StatusUnsupportedMediaType, "the body must be JSON (Content-Type: application/json)")
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil && !errors.Is(err, io.EOF) {
		return echo.NewHTTPError(http.StatusBadRequest, "invalid JSON body: "+err.Error())
	}
	return nil
}

// destinationsPage is the page of destinations.
type destinationsPage struct {
	viewer
	Destinations []DestinationJSON
	// Held are the entities waiting for order (fifo), oldest first.
	Held  []HeldEntityJSON
	Error string
	Flash string
}

// browseDestinations handles GET /admin/view/destinations.
func (a *Admin) browseDestinations(c echo.Context) error {
	list, err := a.cfg.Destinations.List(c.Request().Context())
	data := destinationsPage{Flash: destinationFlashes[c.QueryParam("done")]}
	if err != nil {
		data.Error = "Redis did not answer: circuit states and calls in flight are unknown."
	}
	for _, st := range list {
		data.Destinations = append(data.Destinations, toDestinationJSON(st))
	}
	held, err := a.heldEntities(c)
	if err != nil {
		return httpError(err)
	}
	data.Held = held.Entities
	return a.render(c, http.StatusOK, "destinations", &data)
}

// destinationFlashes are the messages the page may show after a form;
// the query names a key, never free text.
var destinationFlashes = map[string]string{
	"paused":  "Paused: its calls wait (no attempt spent) until it is resumed; every process sees it within seconds.",
	"resumed": "Resumed: the calls that waited go out now.",
}

// browseSteer handles the Pause and Resume forms of the destinations'
// page and of a destination's page (back=destination), and redirects back
// to the page (303).
func (a *Admin) browseSteer(pause bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if err := parseForm(r); err != nil {
			return err
		}
		in := steerInput{By: r.PostForm.Get("by"), Reason: r.PostForm.Get("reason")}
		if _, err := a.steer(c, pause, r.PostForm.Get("source"), r.PostForm.Get("destination"), in); err != nil {
			return err
		}
		done := "resumed"
		if pause {
			done = "paused"
		}
		back := "/admin/view/destinations"
		if r.PostForm.Get("back") == "destination" {
			back = destinationPageURL(r.PostForm.Get("source"), r.PostForm.Get("destination"))
		}
		return c.Redirect(http.StatusSeeOther, back+"?"+url.Values{"done": {done}}.Encode())
	}
}

// shortDuration writes d as an operator reads it: "30s", "1m", "1m30s",
// "2h" (Go's String writes "1m0s").
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
