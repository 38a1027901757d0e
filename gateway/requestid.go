package gateway

import (
	"log/slog"

	"github.com/labstack/echo/v4"
)

// maxRequestIDBytes bounds a client's X-Request-Id that is kept.
const maxRequestIDBytes = 128

// keepSafeRequestID drops a client's X-Request-Id unless it is at most
// maxRequestIDBytes of [A-Za-z0-9._:-], before Echo's RequestID
// middleware, which then generates one of its own: the id is echoed in
// the answer and written in every log line of the request, so a client
// must not choose a megabyte or a line break for it.
func (s *Server) keepSafeRequestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Request().Header
		if id := h.Get(echo.HeaderXRequestID); id != "" && !safeRequestID(id) {
			h.Del(echo.HeaderXRequestID)
			s.log.DebugContext(c.Request().Context(), "client X-Request-Id replaced",
				slog.Int("request_id_bytes", len(id)))
		}
		return next(c)
	}
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
