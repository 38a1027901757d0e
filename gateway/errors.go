package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway/eventid"
	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/jobs"
)

var (
	// ErrBodyTooLarge is returned when the body exceeds the route's limit
	// (max_body_bytes for webhooks; see LimitBody) (413).
	ErrBodyTooLarge = errors.New("body exceeds the size limit")
	// ErrUnreadableBody is returned when the request's body could not be
	// read to its end (400).
	ErrUnreadableBody = errors.New("could not read body")
	// ErrUnavailable is returned when the event could not be recorded
	// because Postgres did not answer in time (503: the sender retries).
	ErrUnavailable = errors.New("storage unavailable, retry later")
)

// errorBody is every error answer's JSON.
type errorBody struct {
	Error string `json:"error"`
}

// statusOf maps an error to its HTTP status and public message.
func statusOf(err error) (int, string) {
	var (
		he       *echo.HTTPError
		tooLarge *http.MaxBytesError
	)
	switch {
	case errors.Is(err, jobs.ErrUnknownSource):
		return http.StatusNotFound, err.Error()
	case errors.Is(err, ErrBodyTooLarge), errors.As(err, &tooLarge):
		return http.StatusRequestEntityTooLarge, ErrBodyTooLarge.Error()
	case errors.Is(err, ErrUnreadableBody):
		return http.StatusBadRequest, ErrUnreadableBody.Error()
	case errors.Is(err, verify.ErrMissingSignature),
		errors.Is(err, verify.ErrMalformedSignature),
		errors.Is(err, verify.ErrSignatureMismatch),
		errors.Is(err, verify.ErrTimestampOutsideTolerance):
		// verify's messages name the failed check and header only.
		return http.StatusUnauthorized, err.Error()
	case errors.Is(err, verify.ErrKeyUnavailable):
		// The key could not be had now (sns's certificate): the sender
		// retries.
		return http.StatusServiceUnavailable, err.Error()
	case errors.Is(err, verify.ErrHandshakeRefused):
		return http.StatusForbidden, err.Error()
	case errors.Is(err, eventid.ErrMissing), errors.Is(err, eventid.ErrUnparseable), errors.Is(err, eventid.ErrInvalid),
		errors.Is(err, ErrInvalidHeader):
		// Their messages name the field and what is wrong, never its value.
		return http.StatusBadRequest, err.Error()
	case errors.Is(err, ErrHeadersTooLarge):
		return http.StatusRequestHeaderFieldsTooLarge, err.Error()
	case errors.Is(err, dedupe.ErrInvalidInput):
		// The database's message may quote the value: not echoed.
		return http.StatusBadRequest, "the event holds a value that cannot be stored (not UTF-8 text, or too large)"
	case errors.Is(err, ErrBusy):
		return http.StatusServiceUnavailable, ErrBusy.Error()
	case errors.Is(err, ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, ErrUnavailable.Error()
	case errors.As(err, &he):
		msg := http.StatusText(he.Code)
		if s, ok := he.Message.(string); ok {
			msg = s
		}
		return he.Code, msg
	}
	return http.StatusInternalServerError, "internal error"
}

// statusClientClosedRequest is nginx's status for a request whose client
// went away before the answer: it reaches no one, but says what happened
// to whatever records the status.
const statusClientClosedRequest = 499

// errorHandler answers every error as JSON with the mapped status. A
// handler that ended with context.Canceled was cut short by its client
// going away (net/http cancels the request's context then; our own
// deadlines end in context.DeadlineExceeded): that is not an error of
// ours, so it is logged at info level and answered 499 with no body.
func errorHandler(log *slog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		ctx := c.Request().Context()
		if errors.Is(err, context.Canceled) {
			log.With(RequestAttrs(c)...).InfoContext(ctx, "client closed the request before its answer", slog.String("path", c.Path()),
				slog.Int("status_code", statusClientClosedRequest))
			_ = c.NoContent(statusClientClosedRequest)
			return
		}
		code, msg := statusOf(err)
		if code == http.StatusInternalServerError {
			log.ErrorContext(c.Request().Context(), "internal error",
				slog.String("path", c.Path()), slog.String("error", err.Error()))
		}
		if c.Request().Method == http.MethodHead {
			_ = c.NoContent(code)
			return
		}
		_ = c.JSON(code, errorBody{Error: msg})
	}
}
