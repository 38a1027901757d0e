package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/webhookd/webhookd/gateway/textfield"
)

// What a request stores beside its body: its Content-Type and its
// headers. Both are checked here, at the edge, so that a value Postgres
// would refuse (invalid UTF-8, a NUL) or one without a bound is answered
// 400 or 431 and never reaches a statement shared with other requests.
const (
	// maxContentTypeBytes bounds the stored Content-Type.
	maxContentTypeBytes = 256
	// maxStoredHeaderBytes bounds the stored headers: names and values,
	// credentials left out (see storedHeaders).
	maxStoredHeaderBytes = 16 << 10
	// maxStoredHeaderValues bounds how many header values are stored.
	maxStoredHeaderValues = 100
)

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

// storedHeaders returns the headers worth storing as a JSON object:
// every header but the hop's credentials (droppedHeaders). A value that
// is not valid UTF-8 is stored with U+FFFD in place of its bad bytes (as
// JSON must); a NUL, an invalid name or a value over the bound is
// ErrInvalidHeader, and more than maxStoredHeaderBytes or
// maxStoredHeaderValues in all is ErrHeadersTooLarge.
func storedHeaders(h http.Header) ([]byte, error) {
	keep := make(http.Header, len(h))
	size, count := 0, 0
	for name, values := range h {
		if !httpguts.ValidHeaderFieldName(name) {
			return nil, fmt.Errorf("%w: a header name is not a token", ErrInvalidHeader)
		}
		if dropped(name) {
			continue
		}
		vs := make([]string, len(values))
		for i, v := range values {
			v = strings.ToValidUTF8(v, "\uFFFD")
			if err := textfield.Check(v, maxStoredHeaderBytes); err != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrInvalidHeader, name, err)
			}
			vs[i] = v
			size += len(name) + len(v)
		}
		count += len(values)
		if size > maxStoredHeaderBytes || count > maxStoredHeaderValues {
			return nil, fmt.Errorf("%w (at most %d bytes in %d values, credentials not counted)",
				ErrHeadersTooLarge, maxStoredHeaderBytes, maxStoredHeaderValues)
		}
		keep[name] = vs
	}
	b, err := json.Marshal(keep)
	if err != nil {
		return nil, fmt.Errorf("error encoding headers: %w", err)
	}
	return b, nil
}

// droppedHeaders are not stored with the event: credentials of the hop to
// webhookd, not of the sender's event.
var droppedHeaders = []string{"Authorization", "Cookie", "Proxy-Authorization"}

func dropped(name string) bool {
	for _, d := range droppedHeaders {
		if d == name {
			return true
		}
	}
	return false
}
