package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/webhookd/webhookd/internal/textfield"
)

// What a request stores beside its body: its Content-Type (here) and its
// headers (storedheaders.go). Both are checked at the edge, so that a
// value Postgres would refuse (invalid UTF-8, a NUL) or one without a
// bound is answered 400 or 431 and never reaches a statement shared with
// other requests.

// maxContentTypeBytes bounds the stored Content-Type.
const maxContentTypeBytes = 256

var (
	// ErrInvalidHeader is returned when the Content-Type or another
	// header cannot be stored as text: invalid UTF-8 (Content-Type), a
	// NUL or control character, an invalid name, or too long (400). Its
	// message names the header, never its value.
	ErrInvalidHeader = errors.New("invalid request header")
	// ErrHeadersTooLarge is returned when the headers to store exceed
	// maxStoredHeaderBytes or maxStoredHeaderValues (431).
	ErrHeadersTooLarge = errors.New("request headers too large to store")
)

// contentType returns the request's Content-Type, trimmed, or an error
// wrapping ErrInvalidHeader. It is forwarded to destinations as is, so it
// is refused, not repaired, when it is not one line of UTF-8 text.
func contentType(h http.Header) (string, error) {
	ct := strings.TrimSpace(h.Get("Content-Type"))
	if err := textfield.CheckLine(ct, maxContentTypeBytes); err != nil {
		return "", fmt.Errorf("%w: Content-Type: %w", ErrInvalidHeader, err)
	}
	return ct, nil
}
