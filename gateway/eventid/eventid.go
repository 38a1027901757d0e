// Package eventid extracts a webhook's external event id, the key that
// makes a delivery a duplicate of an earlier one.
//
// An id source is written as a spec string:
//
//   - json:<path> reads a gjson dot path (data.object.id) from the JSON
//     body. Strings are used as they are, numbers as their literal text;
//     objects, arrays, booleans, null and empty strings count as missing.
//   - header:<Name> reads a request header (first value).
//   - body-sha256 is the hex SHA-256 of the raw body, for senders that send
//     no id: identical bodies then count as one event.
//
// Ids are never a time, a random value or an attempt number. An id longer
// than MaxLen bytes, or holding control characters or invalid UTF-8, is
// rejected with ErrInvalid.
package eventid

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode"

	"github.com/tidwall/gjson"
	"golang.org/x/net/http/httpguts"

	"github.com/webhookd/webhookd/internal/jsonlimit"
	"github.com/webhookd/webhookd/internal/textfield"
)

// MaxLen is the longest id Extract returns, in bytes.
const MaxLen = 255

var (
	// ErrMissing is returned by Extract when the id is absent or empty (or,
	// for json:, not a string or number).
	ErrMissing = errors.New("event id missing")
	// ErrUnparseable is returned by Extract for a json: spec when the body
	// is not valid JSON or nests deeper than jsonlimit.MaxDepth.
	ErrUnparseable = fmt.Errorf("body is not valid JSON, or nests deeper than %d levels", jsonlimit.MaxDepth)
	// ErrInvalid is returned by Extract when the id is longer than MaxLen
	// bytes or contains control characters or invalid UTF-8.
	ErrInvalid = errors.New("event id invalid")
)

type kind uint8

const (
	kindNone kind = iota
	kindJSON
	kindHeader
	kindBodySHA256
)

// Extractor is a parsed event-id spec: json:<path> | header:<Name> |
// body-sha256. The zero Extractor extracts nothing; build one with Parse.
type Extractor struct {
	kind kind
	arg  string // gjson path, or canonical header name
	spec string
}

// Parse parses an event-id spec. The error names the bad spec.
func Parse(spec string) (Extractor, error) {
	switch {
	case spec == "body-sha256":
		return Extractor{kind: kindBodySHA256, spec: spec}, nil
	case strings.HasPrefix(spec, "json:"):
		path := strings.TrimPrefix(spec, "json:")
		if path == "" || strings.TrimSpace(path) != path {
			return Extractor{}, fmt.Errorf("spec %q: json: needs a path such as json:data.object.id", spec)
		}
		return Extractor{kind: kindJSON, arg: path, spec: spec}, nil
	case strings.HasPrefix(spec, "header:"):
		name := strings.TrimPrefix(spec, "header:")
		if !httpguts.ValidHeaderFieldName(name) {
			return Extractor{}, fmt.Errorf("spec %q: header: needs a valid header name such as header:X-Request-Id", spec)
		}
		return Extractor{kind: kindHeader, arg: http.CanonicalHeaderKey(name), spec: spec}, nil
	default:
		return Extractor{}, fmt.Errorf("spec %q: want json:<path>, header:<Name> or body-sha256", spec)
	}
}

// Header returns the header a header:<Name> spec reads (canonical) and
// true; false for any other spec.
func (e Extractor) Header() (string, bool) {
	if e.kind != kindHeader {
		return "", false
	}
	return e.arg, true
}

// String returns the spec e was parsed from.
func (e Extractor) String() string { return e.spec }

// Body is a request body read by several specs of one source (the id,
// the type, the order fields): json: specs check its JSON
// (jsonlimit.Valid, a walk of the whole body) when the first of them
// reads it, not once each. Build it with NewBody; it belongs to one
// request.
type Body struct {
	raw            []byte
	checked, valid bool
}

// NewBody returns b as a Body for ExtractFrom.
func NewBody(b []byte) Body { return Body{raw: b} }

// validJSON reports whether the body is JSON within jsonlimit's depth,
// checking it on first use.
func (b *Body) validJSON() bool {
	if !b.checked {
		b.valid, b.checked = jsonlimit.Valid(b.raw), true
	}
	return b.valid
}

// Extract returns the event id of a request. It returns an error wrapping
// ErrMissing when the id is absent or empty, ErrUnparseable when a json:
// spec meets a body that is not valid JSON, and ErrInvalid when the id is
// too long or holds control characters. body-sha256 of an empty body is
// ErrMissing.
func (e Extractor) Extract(header http.Header, body []byte) (string, error) {
	b := NewBody(body)
	return e.ExtractFrom(header, &b)
}

// ExtractFrom is Extract reading a Body that other specs of the request
// read too: its JSON is checked once for all of them.
func (e Extractor) ExtractFrom(header http.Header, b *Body) (string, error) {
	body := b.raw
	var id string
	switch e.kind {
	case kindJSON:
		if !b.validJSON() {
			return "", ErrUnparseable
		}
		r := gjson.GetBytes(body, e.arg)
		switch r.Type {
		case gjson.String:
			id = r.Str
		case gjson.Number:
			id = r.Raw
		}
	case kindHeader:
		id = header.Get(e.arg)
	case kindBodySHA256:
		if len(body) == 0 {
			return "", fmt.Errorf("%w: empty body", ErrMissing)
		}
		sum := sha256.Sum256(body)
		return hex.EncodeToString(sum[:]), nil
	default:
		return "", errors.New("eventid: Extractor not built with Parse")
	}
	if id == "" {
		return "", fmt.Errorf("%w (%s)", ErrMissing, e.spec)
	}
	if err := textfield.CheckLine(id, MaxLen); err != nil {
		return "", fmt.Errorf("%w (%s): %w", ErrInvalid, e.spec, err)
	}
	if strings.TrimFunc(id, invisible) == "" {
		return "", fmt.Errorf("%w (%s): only white space or invisible characters", ErrInvalid, e.spec)
	}
	return id, nil
}

// invisible reports whether r shows as nothing: white space or a format
// character (zero-width space, joiners, BOM). An id of only such
// characters names nothing an operator can read or type.
func invisible(r rune) bool {
	return unicode.IsSpace(r) || unicode.Is(unicode.Cf, r)
}
