package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"golang.org/x/net/http/httpguts"

	"github.com/webhookd/webhookd/internal/textfield"
)

// The headers stored with an event, shown on its admin page, are the
// sender's, bounded, without credentials (docs/providers.md, "Stored
// headers", keeps the same lists for operators):
//
//   - A header whose lower-case name contains one of credentialWords (the
//     hop's Authorization and Cookie among them), or has one of
//     credentialParts as a whole part (parts are split at '-' and '_'),
//     is not stored: it is a credential of the hop to webhookd, such as
//     X-Api-Key, X-Api_Key, X-Functions-Key, Webhook-Auth, X-Auth-Token,
//     X-Gitlab-Token or a client certificate a proxy passed on, not part
//     of the event. notCredentials are exceptions: ids whose names
//     contain such a word.
//   - A header whose name contains one of signatureWords, or is the
//     source's own signature header, is stored masked, its length only:
//     a signature with its body would let whoever reads the admin page
//     send the request again.
//   - A header a destination of the source forwards by name
//     (forward_headers) is stored as it came, credential or signature:
//     it is forwarded from what is stored. The event's admin page shows
//     it masked all the same (MaskHeaders, which is told the source's
//     own signature header).
//   - What is stored is at most maxStoredHeaderBytes of names and values
//     in maxStoredHeaderValues values; a request with more is refused
//     (431), not stored cut.
const (
	// maxStoredHeaderBytes bounds the stored headers' names and values.
	maxStoredHeaderBytes = 16 << 10
	// maxStoredHeaderValues bounds how many header values are stored.
	maxStoredHeaderValues = 100
)

// credentialWords mark a header that is not stored, wherever they are in
// its name.
var credentialWords = []string{
	"authorization", "authentication", "cookie", "token", "secret", "password", "passwd",
	"apikey", "credential", "session", "verification",
}

// credentialParts mark a header that is not stored when one is a whole
// part of its name: X-Api-Key, X-Functions-Key, X-Webhook-Key,
// Webhook-Auth, X-Forwarded-Client-Cert. As parts they do not catch
// names that merely contain them (X-Author, Keyword).
var credentialParts = []string{"auth", "key", "cert", "pass"}

// notCredentials are stored although a credential word or part is in
// their name: senders' ids and event names (GitLab's event id is
// Idempotency-Key; Bitbucket's and Jira's event type is X-Event-Key).
var notCredentials = []string{"i-twilio-idempotency-token", "idempotency-key", "x-event-key"}

// signatureWords mark a header that is stored masked.
var signatureWords = []string{"signature", "hmac"}

// storedHeaders returns the headers worth storing as a JSON object, as
// the policy above says; signatureHeader is the source's own signature
// header, if it has one; forwarded are the canonical names of the headers
// its destinations forward, stored as they came. A value that is not
// valid UTF-8 is stored with U+FFFD in place of its bad bytes (as JSON
// must); a NUL or an invalid name is ErrInvalidHeader, and more than the
// bounds is ErrHeadersTooLarge.
func storedHeaders(h http.Header, signatureHeader string, forwarded []string) ([]byte, error) {
	keep := make([]storedHeader, 0, len(h))
	size, count := 0, 0
	for name, values := range h {
		if !httpguts.ValidHeaderFieldName(name) {
			return nil, fmt.Errorf("%w: a header name is not a token", ErrInvalidHeader)
		}
		lower := strings.ToLower(name)
		named := len(forwarded) > 0 && slices.Contains(forwarded, http.CanonicalHeaderKey(name))
		if !named && sensitive(lower) {
			continue
		}
		masked := !named && (containsAny(lower, signatureWords) || strings.EqualFold(name, signatureHeader))
		count += len(values)
		vs := make([]string, len(values))
		for i, v := range values {
			if masked {
				v = "[masked: " + strconv.Itoa(len(v)) + " bytes]"
			}
			size += len(name) + len(v)
			if size > maxStoredHeaderBytes || count > maxStoredHeaderValues {
				return nil, fmt.Errorf("%w (at most %d bytes in %d values, credentials not counted)",
					ErrHeadersTooLarge, maxStoredHeaderBytes, maxStoredHeaderValues)
			}
			v = strings.ToValidUTF8(v, "\uFFFD")
			if err := textfield.Check(v, maxStoredHeaderBytes); err != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrInvalidHeader, name, err)
			}
			vs[i] = v
		}
		keep = append(keep, storedHeader{name: name, values: vs})
	}
	return encodeStoredHeaders(keep, size)
}

// storedHeader is one header as stored: its name as it came and its
// values, masked where the policy says.
type storedHeader struct {
	name   string
	values []string
}

// encodeStoredHeaders writes the headers as one JSON object, names in
// order (as encoding/json writes a map), values as arrays of strings.
// Written directly because it runs for every request: encoding/json's
// reflection over a map was most of storedHeaders' cost
// (docs/performance.md). size is the names' and values' bytes, to size
// the buffer once.
func encodeStoredHeaders(headers []storedHeader, size int) ([]byte, error) {
	slices.SortFunc(headers, func(a, b storedHeader) int { return strings.Compare(a.name, b.name) })
	b := make([]byte, 0, size+8*len(headers)+16)
	b = append(b, '{')
	var err error
	for i, hd := range headers {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = jsontext.AppendQuote(b, hd.name); err != nil {
			return nil, fmt.Errorf("error encoding header %s: %w", hd.name, err)
		}
		b = append(b, ':', '[')
		for j, v := range hd.values {
			if j > 0 {
				b = append(b, ',')
			}
			if b, err = jsontext.AppendQuote(b, v); err != nil {
				return nil, fmt.Errorf("error encoding header %s: %w", hd.name, err)
			}
		}
		b = append(b, ']')
	}
	return append(b, '}'), nil
}

// sensitive reports whether a header, by its lower-case name, is a
// credential of the hop.
func sensitive(lower string) bool {
	if slices.Contains(notCredentials, lower) {
		return false
	}
	if containsAny(lower, credentialWords) {
		return true
	}
	for part := range strings.FieldsFuncSeq(lower, func(r rune) bool { return r == '-' || r == '_' }) {
		if slices.Contains(credentialParts, part) {
			return true
		}
	}
	return false
}

// MaskHeaders returns stored headers (a JSON object of value lists) for
// display: the credentials and signatures a destination forwards by name,
// which are stored as they came, are shown as their length only, and so
// is signatureHeader, the source's own signature header when its name does
// not say so (Source.SignatureHeader; "" for none). Headers that do not
// parse are returned as they are.
func MaskHeaders(stored []byte, signatureHeader string) []byte {
	var h map[string][]string
	if json.Unmarshal(stored, &h) != nil {
		return stored
	}
	changed := false
	for name, values := range h {
		lower := strings.ToLower(name)
		if !sensitive(lower) && !containsAny(lower, signatureWords) && !strings.EqualFold(name, signatureHeader) {
			continue
		}
		for i, v := range values {
			if !strings.HasPrefix(v, "[masked: ") {
				values[i], changed = "[masked: "+strconv.Itoa(len(v))+" bytes]", true
			}
		}
	}
	if !changed {
		return stored
	}
	b, err := json.Marshal(h)
	if err != nil {
		return stored
	}
	return b
}

func containsAny(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}
