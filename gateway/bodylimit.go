package gateway

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// Body limits of the routes that take no body (health, readiness,
// metrics). The webhook route reads its body itself, up to
// Config.MaxBodyBytes; the admin surface sets its own per route.
const noBody = 0

// LimitBody returns route middleware that lets the handler read at most n
// bytes of request body. A declared Content-Length over n is answered 413
// (ErrBodyTooLarge) before the handler runs, without reading; a body that
// turns out longer fails the handler's read with *http.MaxBytesError,
// which the error handler also answers 413, and the connection is closed
// after the answer. n = 0 admits no body.
func LimitBody(n int64) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			if req.ContentLength > n {
				return ErrBodyTooLarge
			}
			// The response's own writer, so that net/http learns the
			// limit was hit and closes the connection.
			req.Body = http.MaxBytesReader(c.Response().Writer, req.Body, n)
			return next(c)
		}
	}
}
