package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway/eventid"
	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/jobs"
)

// accepted is the answer to a first delivery.
type accepted struct {
	Status  string `json:"status"`
	Source  string `json:"source"`
	EventID string `json:"event_id"`
}

// duplicate is the answer to a repeat delivery.
type duplicate struct {
	Status     string `json:"status"`
	Source     string `json:"source"`
	EventID    string `json:"event_id"`
	Deliveries int    `json:"deliveries"`
	State      string `json:"state"`
}

var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// ingest handles POST /webhooks/:source, and GET for handshakes (Meta's
// subscribe GET). Each request is one decision: receive returns it, and
// it is counted, timed and (when refused) logged here, once.
func (s *Server) ingest(c echo.Context) error {
	start := time.Now()
	req := c.Request()
	name := c.Param("source")
	log := s.log.With(append([]any{slog.String("source", name)}, RequestAttrs(c)...)...)
	r := s.receive(c, name, log)
	outcome := r.outcome
	if r.err != nil {
		outcome = outcomeOf(r.err)
	}
	if errors.Is(r.err, jobs.ErrUnknownSource) {
		// A name no one configured is no metric label, and not worth a
		// log line per scanner's request; unknown names share one bound
		// of the records kept.
		s.metrics.observe("unknown", outcome, time.Since(start))
		s.cfg.Rejected.keep(req, name, "", "", http.StatusNotFound, r.err, nil, 0)
		return r.err
	}
	s.metrics.observe(name, outcome, time.Since(start))
	if r.err != nil && strings.HasPrefix(outcome, "rejected_") {
		log.WarnContext(req.Context(), "webhook rejected", slog.String("outcome", outcome),
			slog.String("reason", r.err.Error()), slog.Int("body_bytes", r.bodyBytes))
		if status, _ := statusOf(r.err); status >= 400 && status < 500 {
			s.cfg.Rejected.keep(req, name, name, r.signatureHeader, status, r.err, r.body, r.bodyBytes)
		}
	}
	return r.err
}

// received is how a request ended: an outcome (the webhookd_received_total
// label) on success, or the error answered (its outcome is outcomeOf's).
type received struct {
	outcome   string
	err       error
	bodyBytes int
	// body is a copy of the refused body's first bytes and
	// signatureHeader the source's, for the record of a rejected request
	// (when the gateway keeps them).
	body            []byte
	signatureHeader string
}

// receive reads, verifies and records one request and answers it.
func (s *Server) receive(c echo.Context, name string, log *slog.Logger) received {
	req := c.Request()
	ctx := req.Context()
	src, ok := s.sources.Load()[name]
	if !ok {
		return received{err: jobs.ErrUnknownSource}
	}
	buf := bodyPool.Get().(*bytes.Buffer)
	buf.Reset()
	recycle := true
	defer func() {
		if recycle {
			bodyPool.Put(buf)
		}
	}()
	limit := s.cfg.MaxBodyBytes
	if src.MaxBodyBytes > 0 {
		limit = src.MaxBodyBytes
	}
	held, err := readBody(buf, req, limit, s.bodies)
	defer s.bodies.give(held)
	if err != nil {
		if errors.Is(err, ErrBusy) {
			c.Response().Header().Set("Retry-After", "1")
		}
		return received{err: err}
	}
	body := buf.Bytes()
	refused := func(err error) received {
		r := received{err: err, bodyBytes: len(body), signatureHeader: src.SignatureHeader}
		if s.cfg.Rejected != nil {
			// The buffer goes back to the pool when receive returns.
			r.body = bytes.Clone(body[:min(len(body), rejectedBodyBytes)])
		}
		return r
	}

	vreq := verify.Request{Method: req.Method, Header: req.Header, Body: body, RawQuery: req.URL.RawQuery}
	// A sender's handshake is answered before and instead of recording.
	answer, isHandshake, err := verify.HandshakeContext(ctx, src.Verifier, vreq, s.cfg.Now())
	if err == nil && answer.LearnedSecret != "" {
		// The secret that will sign this sender's events (Asana): kept
		// before the handshake is answered, first handshake only.
		if l, ok := src.Verifier.(verify.SecretLearner); ok {
			err = s.learned.learn(ctx, name, l, answer.LearnedSecret)
		}
	}
	if err != nil {
		return refused(err)
	}
	if isHandshake {
		log.InfoContext(ctx, "answered handshake", slog.String("scheme", src.Scheme), slog.String("note", answer.Note))
		for k, v := range answer.Header {
			c.Response().Header()[k] = v
		}
		if answer.Body == nil {
			return received{outcome: "challenge", err: c.NoContent(answer.Status)}
		}
		// Handshakes echo what the sender chose: never sniffed as HTML.
		c.Response().Header().Set("X-Content-Type-Options", "nosniff")
		return received{outcome: "challenge", err: c.Blob(answer.Status, answer.ContentType, answer.Body)}
	}
	if req.Method != http.MethodPost {
		// GET is routed here for handshakes only.
		return refused(echo.ErrMethodNotAllowed)
	}
	learner, learns := src.Verifier.(verify.SecretLearner)
	if learns {
		s.learned.load(ctx, log, name, learner, false)
	}
	err = verify.VerifyContext(ctx, src.Verifier, vreq, s.cfg.Now())
	if learns && errors.Is(err, verify.ErrSignatureMismatch) {
		// Another replica may have learned, or an operator reset, the
		// secret since it was read.
		s.learned.load(ctx, log, name, learner, true)
		err = verify.VerifyContext(ctx, src.Verifier, vreq, s.cfg.Now())
	}
	if errors.Is(err, verify.ErrKeyUnavailable) {
		log.WarnContext(ctx, "could not verify now; answering 503", slog.String("reason", err.Error()))
	}
	if err != nil {
		return refused(err)
	}
	ev, err := newEvent(name, src, req.Header, body)
	if err != nil {
		return refused(err)
	}
	if src.ContentWindow > 0 {
		ev.ContentDigest, ev.ContentWindow = verify.SignedDigest(src.Verifier, vreq), src.ContentWindow
	}
	id := ev.ExternalID
	log = log.With(slog.String("event_id", id))
	if src.OrderEntity != nil && ev.OrderEntity == "" {
		log.WarnContext(ctx, "order fields missing; event is not ordered")
	}

	rec, err := s.record(ctx, ev)
	if err != nil {
		// A request that ended while its event waited leaves the event
		// in its batch, still to be written: the body is not ours to
		// reuse.
		recycle = false
		switch {
		case errors.Is(err, dedupe.ErrInvalidInput):
			return refused(fmt.Errorf("the database refused the event's values: %w", err))
		case errors.Is(err, context.Canceled):
			// The sender went away; its event may still commit with its
			// batch. The error handler logs the request's end.
			return received{err: err}
		}
		log.ErrorContext(ctx, "could not record event; answering 503", slog.String("error", err.Error()))
		return received{err: fmt.Errorf("%w: %w", ErrUnavailable, err)}
	}
	if rec.Pending && s.handoff != nil {
		// Also for a repeat: a hand-off cut short by a crash or a
		// cancelled request is retried now instead of at the next scan.
		s.handoff.Notify(ctx, dedupe.EventRef{Source: name, ExternalID: id, EventType: ev.EventType, Plan: ev.Plan,
			RecordXID: rec.RecordXID, RecordedWith: rec.RecordedWith})
	}
	if rec.CopyOf != "" {
		// A copy of a recorded delivery under another id (the id is not
		// signed): a replay, or the sender's own resend under a new id.
		log.WarnContext(ctx, "signed content already recorded under another event id; answered as a duplicate of it, nothing recorded",
			slog.String("copy_of", rec.CopyOf), slog.Int("deliveries", rec.Deliveries), slog.String("state", rec.State))
		return received{outcome: "duplicate_content",
			err: respond(c, src, http.StatusOK, duplicate{Status: "duplicate", Source: name, EventID: rec.CopyOf, Deliveries: rec.Deliveries, State: rec.State})}
	}
	if rec.Inserted {
		if src.OrderEntity != nil && ev.OrderEntity == "" {
			s.metrics.unordered.WithLabelValues(name).Inc()
		}
		log.InfoContext(ctx, "event accepted", slog.Int("deliveries", rec.Deliveries), slog.Int("body_bytes", len(body)))
		return received{outcome: "accepted", err: respond(c, src, http.StatusAccepted, accepted{Status: "accepted", Source: name, EventID: id})}
	}
	log.InfoContext(ctx, "duplicate delivery", slog.Int("deliveries", rec.Deliveries), slog.String("state", rec.State))
	return received{outcome: "duplicate", err: respond(c, src, http.StatusOK, duplicate{Status: "duplicate", Source: name, EventID: id, Deliveries: rec.Deliveries, State: rec.State})}
}

// newEvent builds the event a request records, every text field checked: the
// id and order fields (eventid refuses invalid ones), the Content-Type and
// the headers (see eventfields.go). Order fields that are absent leave
// the event unordered; present but invalid, they refuse it.
func newEvent(name string, src Source, h http.Header, body []byte) (dedupe.Event, error) {
	idHeader := verify.EventHeaders(src.Scheme, h)
	// The id, the type and the order fields read one body: its JSON is
	// checked once for them all.
	read := eventid.NewBody(body)
	id, err := src.EventID.ExtractFrom(idHeader, &read)
	if err != nil {
		return dedupe.Event{}, err
	}
	ct, err := contentType(h)
	if err != nil {
		return dedupe.Event{}, err
	}
	headers, err := storedHeaders(h, src.SignatureHeader, src.ForwardHeaders)
	if err != nil {
		return dedupe.Event{}, err
	}
	eventType, err := extractEventType(src, idHeader, &read)
	if err != nil {
		return dedupe.Event{}, err
	}
	ev := dedupe.Event{
		Source:      name,
		ExternalID:  id,
		EventType:   eventType,
		Plan:        src.plan(eventType),
		ContentType: ct,
		Headers:     headers,
		Payload:     verify.StoredBody(src.Verifier, body),
	}
	if src.OrderEntity != nil {
		// Without a version (fifo only), the order is the one recorded.
		entity, errE := src.OrderEntity.ExtractFrom(idHeader, &read)
		var version string
		var errV error
		if src.OrderVersion != nil {
			version, errV = src.OrderVersion.ExtractFrom(idHeader, &read)
		}
		if err := errors.Join(errE, errV); errors.Is(err, eventid.ErrInvalid) {
			return dedupe.Event{}, fmt.Errorf("order field: %w", err)
		}
		if errE == nil && errV == nil {
			ev.OrderEntity, ev.OrderVersion = entity, version
		}
	}
	return ev, nil
}

// extractEventType returns the event's type, or "" when the source has
// none or the request does not carry one (absent, empty, or a json: type
// in a body that is not JSON): an event without a type is still an event,
// stored with a NULL type. A type that is there but cannot be stored as
// one line of text (invalid UTF-8, a control character, longer than
// eventid.MaxLen) is refused with a 400 like a bad event id: storing it
// as unknown would route it as if it had no type.
func extractEventType(src Source, h http.Header, body *eventid.Body) (string, error) {
	if src.EventType == nil {
		return "", nil
	}
	t, err := src.EventType.ExtractFrom(h, body)
	switch {
	case err == nil:
		return t, nil
	case errors.Is(err, eventid.ErrInvalid):
		return "", fmt.Errorf("event type: %w", err)
	default:
		return "", nil
	}
}

// plan names the source's destinations that want an event of eventType:
// the event gets a run for each, and its state is computed over them. A
// source without PlanFunc leaves planning to the hand-off (nil).
func (src Source) plan(eventType string) []string {
	if src.PlanFunc == nil {
		return nil
	}
	return src.PlanFunc(eventType)
}

// readBody reads the body once, refusing more than limit bytes, into buf,
// which grows as bytes arrive (never to a declared Content-Length before
// they do). Each byte read is held against budget: it returns how many it
// holds, to give back when the request is answered, and ErrBusy when the
// budget ran out.
func readBody(buf *bytes.Buffer, req *http.Request, limit int64, budget *bodyBudget) (held int64, err error) {
	if req.ContentLength > limit {
		return 0, ErrBodyTooLarge
	}
	r := &budgetReader{r: io.LimitReader(req.Body, limit+1), budget: budget}
	n, err := buf.ReadFrom(r)
	switch {
	case errors.Is(err, ErrBusy):
		return r.held, err
	case err != nil:
		return r.held, fmt.Errorf("%w: %w", ErrUnreadableBody, err)
	case n > limit:
		return r.held, ErrBodyTooLarge
	}
	return r.held, nil
}

// respond answers a recorded delivery, first or repeat: with the answer
// the source's sender expects when it has one (Source.Respond: Adyen's
// "[accepted]"), else with status and webhookd's JSON.
func respond(c echo.Context, src Source, status int, answer any) error {
	r := src.Respond
	if r == nil {
		return c.JSON(status, answer)
	}
	if r.Body == "" {
		return c.NoContent(r.Status)
	}
	c.Response().Header().Set("X-Content-Type-Options", "nosniff")
	return c.Blob(r.Status, r.ContentType, []byte(r.Body))
}
