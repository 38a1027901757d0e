package admin

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway"
)

// eventJSON is an event in the API's answers.
type eventJSON struct {
	Source         string    `json:"source"`
	EventID        string    `json:"event_id"`
	State          string    `json:"state"`
	ReceivedAt     time.Time `json:"received_at"`
	LastReceivedAt time.Time `json:"last_received_at"`
	Deliveries     int       `json:"deliveries"`
	ContentType    string    `json:"content_type"`
	PayloadBytes   int       `json:"payload_bytes"`
	HandedOff      bool      `json:"handed_off"`
	// RecordedOnly marks an event imported as delivered elsewhere:
	// nothing forwards it unless it is replayed.
	RecordedOnly bool     `json:"recorded_only"`
	RunStatuses  []string `json:"run_statuses"`
}

func toEventJSON(e dedupe.EventSummary) eventJSON {
	return eventJSON{
		Source: e.Source, EventID: e.ExternalID, State: e.State, ReceivedAt: e.ReceivedAt,
		LastReceivedAt: e.LastReceivedAt, Deliveries: e.Deliveries, ContentType: e.ContentType,
		PayloadBytes: e.PayloadBytes, HandedOff: e.HandedOff, RecordedOnly: e.RecordedOnly, RunStatuses: nonNil(e.RunStatuses),
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// eventDetailJSON is GET /admin/events/:source/:id's answer.
type eventDetailJSON struct {
	eventJSON
	Headers json.RawMessage `json:"headers"`
	// Payload is the raw body when it is UTF-8 text; PayloadBase64
	// otherwise.
	Payload       *string `json:"payload,omitempty"`
	PayloadBase64 string  `json:"payload_base64,omitempty"`
	// EventType is the event's type; null when the sender gave none.
	EventType    *string       `json:"event_type"`
	OrderEntity  string        `json:"order_entity,omitempty"`
	OrderVersion string        `json:"order_version,omitempty"`
	Runs         []runJSON     `json:"runs"`
	Attempts     []attemptJSON `json:"attempts"`
}

type runJSON struct {
	Key          string          `json:"key"`
	Destination  string          `json:"destination"`
	Generation   int             `json:"generation"`
	Status       string          `json:"status"`
	Attempts     int             `json:"attempts"`
	Calls        int             `json:"calls"`
	MaxAttempts  int             `json:"max_attempts"`
	Permanent    bool            `json:"permanent"`
	Result       json.RawMessage `json:"result,omitempty"`
	LastError    string          `json:"last_error,omitempty"`
	CreatedAt    time.Time       `json:"created_at"`
	StartedAt    *time.Time      `json:"started_at"`
	CompletedAt  *time.Time      `json:"completed_at"`
	HeldUntil    *time.Time      `json:"held_until,omitempty"`
	ReplayedBy   string          `json:"replayed_by,omitempty"`
	ReplayReason string          `json:"replay_reason,omitempty"`
}

type attemptJSON struct {
	Key        string    `json:"key"`
	Call       int       `json:"call"`
	StatusCode int       `json:"status_code,omitempty"`
	Succeeded  bool      `json:"succeeded"`
	Error      string    `json:"error,omitempty"`
	DurationMS float64   `json:"duration_ms"`
	At         time.Time `json:"at"`
	// State is calling, finished or unknown (possible duplicate).
	State   string `json:"state"`
	Outcome string `json:"outcome,omitempty"`
	// AnswerHeaders are the answer's headers of note.
	AnswerHeaders json.RawMessage `json:"answer_headers,omitempty"`
	// AnswerBody is the first 4 KiB of the answer's body when it is
	// UTF-8 text; AnswerBodyBase64 otherwise.
	AnswerBody       *string `json:"answer_body,omitempty"`
	AnswerBodyBase64 string  `json:"answer_body_base64,omitempty"`
	// AnswerTruncated is true when the body was longer than what is kept.
	AnswerTruncated bool `json:"answer_truncated,omitempty"`
	// RetryAt is when the next try was due after this call.
	RetryAt *time.Time `json:"retry_at,omitempty"`
}

func toDetailJSON(d dedupe.EventDetail) eventDetailJSON {
	out := eventDetailJSON{
		eventJSON:    toEventJSON(d.EventSummary),
		Headers:      json.RawMessage(gateway.MaskHeaders(d.Headers)),
		OrderEntity:  d.OrderEntity,
		OrderVersion: d.OrderVersion,
		Runs:         []runJSON{},
		Attempts:     []attemptJSON{},
	}
	if d.EventType != "" {
		out.EventType = &d.EventType
	}
	if utf8.Valid(d.Payload) {
		s := string(d.Payload)
		out.Payload = &s
	} else {
		out.PayloadBase64 = base64.StdEncoding.EncodeToString(d.Payload)
	}
	for _, r := range d.Runs {
		out.Runs = append(out.Runs, runJSON{
			Key: r.Key, Destination: r.Destination, Generation: r.Generation, Status: r.Status,
			Attempts: r.Attempts, Calls: r.Calls, MaxAttempts: r.MaxAttempts, Permanent: r.Permanent,
			Result: json.RawMessage(r.Result), LastError: r.LastError, CreatedAt: r.CreatedAt,
			StartedAt: r.StartedAt, CompletedAt: r.CompletedAt, HeldUntil: r.HeldUntil,
			ReplayedBy: r.ReplayedBy, ReplayReason: r.ReplayReason,
		})
	}
	for _, at := range d.Attempts {
		aj := attemptJSON{
			Key: at.Key, Call: at.Call, StatusCode: at.StatusCode, Succeeded: at.Succeeded, Error: at.Error,
			DurationMS: float64(at.Duration.Microseconds()) / 1000, At: at.CreatedAt,
			State: at.State, Outcome: at.Outcome, AnswerTruncated: at.Answer.Truncated, RetryAt: at.RetryAt,
		}
		if at.Answer.Headers != nil {
			aj.AnswerHeaders = json.RawMessage(at.Answer.Headers)
		}
		if len(at.Answer.Body) > 0 {
			if utf8.Valid(at.Answer.Body) {
				s := string(at.Answer.Body)
				aj.AnswerBody = &s
			} else {
				aj.AnswerBodyBase64 = base64.StdEncoding.EncodeToString(at.Answer.Body)
			}
		}
		out.Attempts = append(out.Attempts, aj)
	}
	return out
}

// filterFrom reads the listing filter from the query string.
func (a *Admin) filterFrom(c echo.Context) (dedupe.EventFilter, error) {
	now := time.Now()
	f := dedupe.EventFilter{
		Source:       c.QueryParam("source"),
		State:        c.QueryParam("state"),
		Cursor:       c.QueryParam("cursor"),
		Destinations: a.cfg.Routes.DestinationCounts(),
		Filters:      a.cfg.Routes.DestinationFilters(),
	}
	if err := checkText(textInput{"source", f.Source, maxNameBytes}, textInput{"cursor", f.Cursor, maxCursorBytes}); err != nil {
		return f, echo.NewHTTPError(http.StatusBadRequest, err.Error())
	}
	if f.State != "" && !validState(f.State) {
		return f, echo.NewHTTPError(http.StatusBadRequest, "unknown state "+strconv.Quote(f.State))
	}
	var err error
	if f.Since, err = ParseTime(c.QueryParam("since"), now); err != nil {
		return f, echo.NewHTTPError(http.StatusBadRequest, "since: "+err.Error())
	}
	if f.Until, err = ParseTime(c.QueryParam("until"), now); err != nil {
		return f, echo.NewHTTPError(http.StatusBadRequest, "until: "+err.Error())
	}
	if l := c.QueryParam("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 1000 {
			return f, echo.NewHTTPError(http.StatusBadRequest, "limit must be 1..1000")
		}
		f.Limit = n
	}
	return f, nil
}

// listEvents handles GET /admin/events.
func (a *Admin) listEvents(c echo.Context) error {
	f, err := a.filterFrom(c)
	if err != nil {
		return err
	}
	page, err := a.events.ListEvents(c.Request().Context(), f)
	if err != nil {
		return httpError(err)
	}
	out := struct {
		Events []eventJSON `json:"events"`
		Next   string      `json:"next_cursor,omitempty"`
	}{Events: []eventJSON{}, Next: page.Next}
	for _, e := range page.Events {
		out.Events = append(out.Events, toEventJSON(e))
	}
	return c.JSON(http.StatusOK, out)
}

// getEvent handles GET /admin/events/:source/:id.
func (a *Admin) getEvent(c echo.Context) error {
	source, id, err := eventParams(c)
	if err != nil {
		return err
	}
	d, err := a.events.GetEvent(c.Request().Context(), source, id, len(a.cfg.Routes[source]), a.cfg.Routes.DestinationFilters()...)
	if err != nil {
		return httpError(err)
	}
	return c.JSON(http.StatusOK, toDetailJSON(d))
}

// bindInput reads a POST's body (JSON or form) into dst, then lets query
// parameters of the same names override it (Echo binds the query only
// for GET and DELETE).
func bindInput(c echo.Context, dst any, query func(*echo.ValueBinder)) error {
	if err := (&echo.DefaultBinder{}).BindBody(c, dst); err != nil {
		return err
	}
	b := echo.QueryParamsBinder(c)
	query(b)
	return b.BindError()
}

// unescape decodes a path parameter. Echo routes on the raw (escaped)
// path when the URL has one, and then hands parameters over escaped.
func unescape(c echo.Context, v string) (string, error) {
	if c.Request().URL.RawPath == "" {
		return v, nil
	}
	return url.PathUnescape(v)
}

// eventParams returns the event a route names: its :source and :id path
// parameters, unescaped, or on the page routes without path parameters
// its source= and id= query parameters (see eventPageURL).
func eventParams(c echo.Context) (string, string, error) {
	source, id := c.QueryParam("source"), c.QueryParam("id")
	if len(c.ParamNames()) > 0 {
		var err1, err2 error
		source, err1 = unescape(c, c.Param("source"))
		id, err2 = unescape(c, c.Param("id"))
		if err := errors.Join(err1, err2); err != nil {
			return "", "", echo.NewHTTPError(http.StatusBadRequest, "invalid source or event id in path")
		}
	}
	if source == "" || id == "" {
		return "", "", echo.NewHTTPError(http.StatusBadRequest, "source and event id are required")
	}
	if err := checkText(textInput{"source", source, maxNameBytes}, textInput{"event id", id, maxIDBytes}); err != nil {
		return "", "", echo.NewHTTPError(http.StatusBadRequest, err.Error())
	}
	return source, id, nil
}

// replayInput is the optional JSON body of the replay routes; query
// parameters of the same names work too.
type replayInput struct {
	Force       bool   `json:"force" query:"force" form:"force"`
	Destination string `json:"destination" query:"destination" form:"destination"`
	By          string `json:"by" query:"by" form:"by"`
	Reason      string `json:"reason" query:"reason" form:"reason"`
}

// replayEvent handles POST /admin/events/:source/:id/replay: 200 with the
// stored results when nothing needed enqueuing, 202 when something was
// enqueued.
func (a *Admin) replayEvent(c echo.Context) error {
	source, id, err := eventParams(c)
	if err != nil {
		return err
	}
	var in replayInput
	if err := bindInput(c, &in, func(b *echo.ValueBinder) {
		b.Bool("force", &in.Force).String("destination", &in.Destination).String("by", &in.By).String("reason", &in.Reason)
	}); err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "invalid replay request: "+err.Error())
	}
	res, err := a.replay(c.Request().Context(), a.requestLog(c), ReplayRequest{
		Source: source, EventID: id, Destination: in.Destination, Force: in.Force, By: in.By, Reason: in.Reason,
	})
	if errors.Is(err, ErrEnqueueFailed) {
		return c.JSON(http.StatusServiceUnavailable, struct {
			Error string `json:"error"`
			ReplayResult
		}{ErrEnqueueFailed.Error(), res})
	}
	if err != nil {
		return httpError(err)
	}
	code := http.StatusOK
	if res.Enqueued {
		code = http.StatusAccepted
	}
	return c.JSON(code, res)
}

// bulkInput is POST /admin/replay's JSON body (or query parameters).
// DryRun defaults to true: acting needs "dry_run": false.
type bulkInput struct {
	Source string `json:"source" query:"source"`
	State  string `json:"state" query:"state"`
	Since  string `json:"since" query:"since"`
	Until  string `json:"until" query:"until"`
	Cursor string `json:"cursor" query:"cursor"`
	Limit  int    `json:"limit" query:"limit"`
	DryRun *bool  `json:"dry_run" query:"dry_run"`
	Force  bool   `json:"force" query:"force"`
	By     string `json:"by" query:"by"`
	Reason string `json:"reason" query:"reason"`
}

// bulkReplay handles POST /admin/replay.
func (a *Admin) bulkReplay(c echo.Context) error {
	var in bulkInput
	if err := bindInput(c, &in, func(b *echo.ValueBinder) {
		b.String("source", &in.Source).String("state", &in.State).String("since", &in.Since).
			String("until", &in.Until).String("cursor", &in.Cursor).Int("limit", &in.Limit).
			Bool("force", &in.Force).String("by", &in.By).String("reason", &in.Reason)
		if v := c.QueryParam("dry_run"); v != "" {
			var dry bool
			b.Bool("dry_run", &dry)
			in.DryRun = &dry
		}
	}); err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "invalid bulk replay request: "+err.Error())
	}
	now := time.Now()
	since, err := ParseTime(in.Since, now)
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "since: "+err.Error())
	}
	until, err := ParseTime(in.Until, now)
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "until: "+err.Error())
	}
	dry := in.DryRun == nil || *in.DryRun
	log := a.requestLog(c)
	res, err := a.bulkReplayWith(c.Request().Context(), log, BulkRequest{
		Source: in.Source, State: in.State, Since: since, Until: until, Cursor: in.Cursor, Limit: in.Limit,
		DryRun: dry, Force: in.Force, By: in.By, Reason: in.Reason,
	})
	if err != nil {
		return httpError(err)
	}
	if res.Events == nil {
		res.Events = []BulkReplay{}
	}
	code := http.StatusOK
	if res.Enqueued > 0 {
		code = http.StatusAccepted
	}
	log.InfoContext(c.Request().Context(), "bulk replay done", slog.Int("enqueued", res.Enqueued), slog.Int("failed", res.Failed))
	return c.JSON(code, res)
}

// EventDetailJSON renders an event as GET /admin/events/:source/:id
// answers it (for the CLI's --json).
func EventDetailJSON(d dedupe.EventDetail) ([]byte, error) {
	return json.MarshalIndent(toDetailJSON(d), "", "  ")
}

// EventJSON renders a listed event as GET /admin/events answers it.
func EventJSON(e dedupe.EventSummary) ([]byte, error) {
	return json.Marshal(toEventJSON(e))
}
