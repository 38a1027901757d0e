package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"

	"github.com/labstack/echo/v4"
)

// maxRequestIDBytes bounds a client's X-Request-Id that is logged.
const maxRequestIDBytes = 128

// assignRequestID gives every request an id of our own, answered in
// X-Request-Id and written in every log line of the request as
// request_id. A client's own X-Request-Id is logged beside it as
// client_request_id, never in its place: two clients could send the same
// one, and a proxy's id is worth keeping to follow a request across
// hops. The client's id is dropped unless it is at most
// maxRequestIDBytes of [A-Za-z0-9._:-], so it cannot carry a megabyte or
// a line break into the log.
func assignRequestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Request().Header
		if id := h.Get(echo.HeaderXRequestID); id != "" && !safeRequestID(id) {
			h.Del(echo.HeaderXRequestID)
		}
		var b [12]byte
		_, _ = rand.Read(b[:]) // never fails (crypto/rand)
		c.Response().Header().Set(echo.HeaderXRequestID, hex.EncodeToString(b[:]))
		return next(c)
	}
}

// RequestAttrs returns the log attributes naming c's request: our
// request_id and, when the client sent an acceptable one, its
// client_request_id.
func RequestAttrs(c echo.Context) []any {
	attrs := []any{slog.String("request_id", c.Response().Header().Get(echo.HeaderXRequestID))}
	if id := c.Request().Header.Get(echo.HeaderXRequestID); id != "" {
		attrs = append(attrs, slog.String("client_request_id", id))
	}
	return attrs
}

func safeRequestID(id string) bool {
	if len(id) > maxRequestIDBytes {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}
