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
	"github.com/webhookd/webhookd/internal/tracing"
	"github.com/webhookd/webhookd/jobs"
)

// EventJSON is an event in the API's answers (GET /admin/events).
type EventJSON struct {
	Source         string    `json:"source"`
	EventID        string    `json:"event_id"`
	EventType      string    `json:"event_type"`
	State          string    `json:"state"`
	ReceivedAt     time.Time `json:"received_at"`
	LastReceivedAt time.Time `json:"last_received_at"`
	Deliveries     int       `json:"deliveries"`
	ContentType    string    `json:"content_type"`
	PayloadBytes   int       `json:"payload_bytes"`
	HandedOff      bool      `json:"handed_off"`
	// RecordedOnly marks an event imported as delivered elsewhere:
	// nothing forwards it unless it is replayed.
	RecordedOnly bool `json:"recorded_only"`
	// Plan names the destinations the event was planned for when it was
	// recorded (absent for events recorded before plans were kept).
	Plan []string `json:"plan,omitempty"`
	// RunStatuses are the shown statuses of its destinations' latest runs
	// (queued for a planned destination without one); RunDestinations
	// names them, in the same order.
	RunStatuses     []string `json:"run_statuses"`
	RunDestinations []string `json:"run_destinations"`
}

func toEventJSON(e dedupe.EventSummary) EventJSON {
	return EventJSON{
		Source: e.Source, EventID: e.ExternalID, EventType: e.EventType, State: e.State, ReceivedAt: e.ReceivedAt,
		LastReceivedAt: e.LastReceivedAt, Deliveries: e.Deliveries, ContentType: e.ContentType,
		PayloadBytes: e.PayloadBytes, HandedOff: e.HandedOff, RecordedOnly: e.RecordedOnly, Plan: e.Plan,
		RunStatuses: nonNil(e.RunStatuses), RunDestinations: nonNil(e.RunDestinations),
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// EventDetailJSON is GET /admin/events/:source/:id's answer.
type EventDetailJSON struct {
	EventJSON
	Headers json.RawMessage `json:"headers"`
	// Payload is the raw body when it is UTF-8 text; PayloadBase64
	// otherwise.
	Payload       *string `json:"payload,omitempty"`
	PayloadBase64 string  `json:"payload_base64,omitempty"`
	OrderEntity   string  `json:"order_entity,omitempty"`
	OrderVersion  string  `json:"order_version,omitempty"`
	// TraceID is the id of the event's trace (every span from its
	// request to its destination calls), when it was recorded with
	// tracing on.
	TraceID string    `json:"trace_id,omitempty"`
	Runs    []RunJSON `json:"runs"`
	// Waiting are the destinations of its plan that have no run yet:
	// status queued, or held with the reason.
	Waiting  []RunJSON     `json:"waiting"`
	Attempts []AttemptJSON `json:"attempts"`
}

// RunJSON is one run of an event in EventDetailJSON.
type RunJSON struct {
	Key         string `json:"key"`
	Destination string `json:"destination"`
	Generation  int    `json:"generation"`
	// Status is what will happen next (queued, running, retrying, held,
	// done, filtered, skipped_stale, failed, dead); StoredStatus is the
	// job_runs status it is shown from.
	Status       string `json:"status"`
	StoredStatus string `json:"stored_status"`
	// HoldReason says why a held run waits; HoldUntil when it goes on by
	// itself (absent: until resumed).
	HoldReason string     `json:"hold_reason,omitempty"`
	HoldUntil  *time.Time `json:"hold_until,omitempty"`
	// NextTryAt is when a retrying or queued run's next try is due.
	NextTryAt *time.Time `json:"next_try_at,omitempty"`
	// Attempts counts the failed attempts spent of MaxAttempts (failures
	// and crashes; a hold spends none); Calls counts every call.
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
	// SkippedAt, SkippedBy and SkipReason record an operator's skip
	// (order mode fifo): the entity's later events went on past it.
	SkippedAt  *time.Time `json:"skipped_at,omitempty"`
	SkippedBy  string     `json:"skipped_by,omitempty"`
	SkipReason string     `json:"skip_reason,omitempty"`
}

// AttemptJSON is one destination call in EventDetailJSON.
type AttemptJSON struct {
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
	// SentBody is the first 4 KiB of the body sent when a transform
	// made it (the event's payload otherwise, not repeated here).
	SentBody *string `json:"sent_body,omitempty"`
}

// toDetailJSON is d for the API, its headers masked (signatureHeader is
// the source's, see Config.Sources).
func toDetailJSON(d dedupe.EventDetail, signatureHeader string) EventDetailJSON {
	out := EventDetailJSON{
		EventJSON:    toEventJSON(d.EventSummary),
		Headers:      json.RawMessage(gateway.MaskHeaders(d.Headers, signatureHeader)),
		OrderEntity:  d.OrderEntity,
		OrderVersion: d.OrderVersion,
		TraceID:      traceID(d.TraceParent),
		Runs:         []RunJSON{},
		Attempts:     []AttemptJSON{},
	}
	if utf8.Valid(d.Payload) {
		s := string(d.Payload)
		out.Payload = &s
	} else {
		out.PayloadBase64 = base64.StdEncoding.EncodeToString(d.Payload)
	}
	for _, r := range d.Runs {
		rj := RunJSON{
			Key: r.Key, Destination: r.Destination, Generation: r.Generation, Status: r.Shown, StoredStatus: r.Status,
			HoldReason: r.HoldReason, HoldUntil: r.HoldUntil,
			Attempts: r.Attempts, Calls: r.Calls, MaxAttempts: r.MaxAttempts, Permanent: r.Permanent,
			Result: json.RawMessage(r.Result), LastError: r.LastError, CreatedAt: r.CreatedAt,
			StartedAt: r.StartedAt, CompletedAt: r.CompletedAt, HeldUntil: r.HeldUntil,
			ReplayedBy: r.ReplayedBy, ReplayReason: r.ReplayReason,
			SkippedAt: r.SkippedAt, SkippedBy: r.SkippedBy, SkipReason: r.SkipReason,
		}
		if r.Shown == dedupe.ShownRetrying || r.Shown == dedupe.ShownQueued {
			rj.NextTryAt = r.RetryAt
		}
		out.Runs = append(out.Runs, rj)
	}
	out.Waiting = []RunJSON{}
	for _, r := range d.Waiting {
		out.Waiting = append(out.Waiting, RunJSON{Destination: r.Destination, Status: r.Shown, HoldReason: r.HoldReason, HoldUntil: r.HoldUntil})
	}
	for _, at := range d.Attempts {
		aj := AttemptJSON{
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
		if at.SentBody != nil {
			s := string(at.SentBody)
			aj.SentBody = &s
		}
		out.Attempts = append(out.Attempts, aj)
	}
	return out
}

// filterFrom reads the listing filter, cursor and limit from the query
// string.
func (a *Admin) filterFrom(c echo.Context) (filterInput, dedupe.EventFilter, error) {
	in := filterInputFrom(c.QueryParams())
	f, err := a.eventFilter(in, time.Now())
	if err != nil {
		return in, f, httpError(err)
	}
	f.Cursor = c.QueryParam("cursor")
	if err := checkText(textInput{"cursor", f.Cursor, maxCursorBytes}); err != nil {
		return in, f, echo.NewHTTPError(http.StatusBadRequest, err.Error())
	}
	if l := c.QueryParam("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 1000 {
			return in, f, echo.NewHTTPError(http.StatusBadRequest, "limit must be 1..1000")
		}
		f.Limit = n
	}
	return in, f, nil
}

// EventListJSON is GET /admin/events's answer.
type EventListJSON struct {
	Events []EventJSON `json:"events"`
	// Next lists older events; empty on the last page.
	Next string `json:"next_cursor,omitempty"`
	// Prev lists newer events; empty on the first page.
	Prev string `json:"prev_cursor,omitempty"`
	// Total counts the events matching the filter among the newest
	// 10,000 of its indexed part (source, destination, id, time);
	// TotalAtLeast says there may be more ("10,000+").
	Total        int64 `json:"total"`
	TotalAtLeast bool  `json:"total_at_least,omitempty"`
}

// listEvents handles GET /admin/events: the event list page for a browser
// (Accept: text/html), JSON otherwise.
func (a *Admin) listEvents(c echo.Context) error {
	c.Response().Header().Add("Vary", "Accept")
	if wantsHTML(c.Request()) {
		return a.browseList(c)
	}
	_, f, err := a.filterFrom(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	page, err := a.events.ListEvents(ctx, f)
	if err != nil {
		return httpError(err)
	}
	count, err := a.events.CountEvents(ctx, f)
	if err != nil {
		return httpError(err)
	}
	out := EventListJSON{Events: []EventJSON{}, Next: page.Next, Prev: page.Prev, Total: count.Matched, TotalAtLeast: !count.Complete}
	for _, e := range page.Events {
		out.Events = append(out.Events, toEventJSON(e))
	}
	return c.JSON(http.StatusOK, out)
}

// getEvent handles GET /admin/events/:source/:id: the event page for a
// browser (Accept: text/html), JSON otherwise.
func (a *Admin) getEvent(c echo.Context) error {
	c.Response().Header().Add("Vary", "Accept")
	if wantsHTML(c.Request()) {
		return a.browseEvent(c)
	}
	source, id, err := eventParams(c)
	if err != nil {
		return err
	}
	d, err := a.eventDetail(c.Request().Context(), source, id)
	if err != nil {
		return httpError(err)
	}
	return c.JSON(http.StatusOK, toDetailJSON(d, a.gatewaySources()[source].SignatureHeader))
}

// bindInput reads a POST's optional JSON body into dst (415 for a body
// that is not JSON: a form-encoded body is never read as empty), then
// lets query parameters of the same names override it.
func bindInput(c echo.Context, dst any, query func(*echo.ValueBinder)) error {
	if err := bindJSONBody(c, dst); err != nil {
		return err
	}
	b := echo.QueryParamsBinder(c)
	query(b)
	return b.BindError()
}

// bindError answers a request whose input did not bind: the status
// bindJSONBody chose (415, 400), else 400.
func bindError(what string, err error) error {
	var he *echo.HTTPError
	if errors.As(err, &he) {
		return err
	}
	return echo.NewHTTPError(http.StatusBadRequest, "invalid "+what+" request: "+err.Error())
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
		return bindError("replay", err)
	}
	res, err := a.replay(c.Request().Context(), a.requestLog(c), jobs.ReplayRequest{
		Source: source, EventID: id, Destination: in.Destination, Force: in.Force, By: in.By, Reason: in.Reason,
	})
	if errors.Is(err, jobs.ErrEnqueueFailed) {
		return c.JSON(http.StatusServiceUnavailable, struct {
			Error string `json:"error"`
			jobs.ReplayResult
		}{jobs.ErrEnqueueFailed.Error(), res})
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

// skipInput is the optional JSON body of the skip route; query
// parameters of the same names work too.
type skipInput struct {
	Destination string `json:"destination" query:"destination" form:"destination"`
	By          string `json:"by" query:"by" form:"by"`
	Reason      string `json:"reason" query:"reason" form:"reason"`
}

// skipEvent handles POST /admin/events/:source/:id/skip (order mode
// fifo): 200 when a failed or dead run was skipped and its entity's later
// events go on, 409 (with the result) when no run named was failed or
// dead.
func (a *Admin) skipEvent(c echo.Context) error {
	source, id, err := eventParams(c)
	if err != nil {
		return err
	}
	var in skipInput
	if err := bindInput(c, &in, func(b *echo.ValueBinder) {
		b.String("destination", &in.Destination).String("by", &in.By).String("reason", &in.Reason)
	}); err != nil {
		return bindError("skip", err)
	}
	res, err := a.skip(c.Request().Context(), a.requestLog(c), jobs.SkipRequest{
		Source: source, EventID: id, Destination: in.Destination, By: in.By, Reason: in.Reason,
	})
	if err != nil {
		return httpError(err)
	}
	if !res.Skipped {
		return c.JSON(http.StatusConflict, struct {
			Error string `json:"error"`
			jobs.SkipResult
		}{"no run named is failed or dead: only those can be skipped (a replay reopens one)", res})
	}
	return c.JSON(http.StatusOK, res)
}

// bulkInput is POST /admin/replay's JSON body (or query parameters):
// the filter, what to do, and who asks. DryRun defaults to true: acting
// needs "dry_run": false. Destination both filters (events of sources
// that have it) and names where to replay ("*": every destination).
type bulkInput struct {
	filterInput
	Cursor string `json:"cursor"`
	Limit  int    `json:"limit"`
	DryRun *bool  `json:"dry_run"`
	Force  bool   `json:"force"`
	By     string `json:"by"`
	Reason string `json:"reason"`
}

// bulkReplayAPI handles POST /admin/replay.
func (a *Admin) bulkReplayAPI(c echo.Context) error {
	var in bulkInput
	if err := bindInput(c, &in, func(b *echo.ValueBinder) {
		b.String("source", &in.Source).String("state", &in.State).String("since", &in.Since).
			String("until", &in.Until).String("q", &in.Q).String("type", &in.Type).String("status", &in.Status).
			String("cursor", &in.Cursor).Int("limit", &in.Limit).
			String("destination", &in.Destination).Bool("force", &in.Force).String("by", &in.By).String("reason", &in.Reason)
		if v := c.QueryParam("dry_run"); v != "" {
			var dry bool
			b.Bool("dry_run", &dry)
			in.DryRun = &dry
		}
	}); err != nil {
		return bindError("bulk replay", err)
	}
	dry := in.DryRun == nil || *in.DryRun
	log := a.requestLog(c)
	res, err := a.bulkReplayWith(c.Request().Context(), log, bulkRequest{
		filter: in.filterInput, cursor: in.Cursor, limit: in.Limit,
		dryRun: dry, force: in.Force, by: in.By, reason: in.Reason,
	})
	if err != nil {
		return httpError(err)
	}
	code := http.StatusOK
	if res.Enqueued > 0 {
		code = http.StatusAccepted
	}
	log.InfoContext(c.Request().Context(), "bulk replay done", slog.Int("enqueued", res.Enqueued), slog.Int("failed", res.Failed))
	return c.JSON(code, res)
}

// traceID is the trace id a stored traceparent names, or "".
func traceID(traceParent string) string {
	if sc := tracing.SpanContext(traceParent); sc.IsValid() {
		return sc.TraceID().String()
	}
	return ""
}
