package verify

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

const (
	twilioHeader   = "X-Twilio-Signature"
	twilioIDHeader = "I-Twilio-Idempotency-Token"
	twilioBodyHash = "bodySHA256"
)

// twilioScheme verifies X-Twilio-Signature: base64 HMAC-SHA1 of the URL
// (plus sorted form parameters, or with bodySHA256 for JSON bodies).
type twilioScheme struct {
	macs     []*mac
	bases    []string // PublicURL before "?": as configured, then with the default port toggled
	pubQuery string   // PublicURL's own query, used when the request has none
}

func newTwilio(cfg Config, keys [][]byte) (scheme, error) {
	if cfg.PublicURL == "" {
		return nil, errors.New("verify.public_url: required for scheme twilio")
	}
	u, err := url.Parse(cfg.PublicURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Fragment != "" || strings.Contains(cfg.PublicURL, "#") {
		return nil, errors.New("verify.public_url: want an absolute http(s) URL without fragment, as Twilio sees it")
	}
	base, q, _ := strings.Cut(cfg.PublicURL, "?")
	s := &twilioScheme{macs: newMACs(keys, sha1.New), bases: []string{base}, pubQuery: q}
	if alt, ok := togglePort(base, u); ok {
		s.bases = append(s.bases, alt)
	}
	return s, nil
}

// togglePort returns base with the scheme's default port added when it has
// no port, or with its port removed when it has one. Twilio's own
// validators accept both, because Twilio is not consistent about it.
func togglePort(base string, u *url.URL) (string, bool) {
	i := strings.Index(base, "://")
	if i < 0 {
		return "", false
	}
	i += 3
	j := strings.IndexByte(base[i:], '/')
	if j < 0 {
		j = len(base) - i
	}
	auth := base[i : i+j]
	hostport := auth[strings.LastIndexByte(auth, '@')+1:]
	var repl string
	if p := u.Port(); p != "" {
		repl = strings.TrimSuffix(hostport, ":"+p)
	} else {
		def := "443"
		if u.Scheme == "http" {
			def = "80"
		}
		repl = hostport + ":" + def
	}
	k := i + len(auth) - len(hostport)
	return base[:k] + repl + base[i+j:], true
}

// parseTwilioHeader decodes an X-Twilio-Signature value into dst.
func parseTwilioHeader(dst *[sha1.Size]byte, v string) error {
	if !decodeBase64(dst[:], v) {
		return malformed(twilioHeader, "want base64 of 20 bytes")
	}
	return nil
}

// formSuffix is the form parameters as Twilio appends them: name+value,
// sorted by name, then by value for repeated names.
func formSuffix(params url.Values) string {
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		vals := append([]string(nil), params[k]...)
		sort.Strings(vals)
		for _, v := range vals {
			b.WriteString(k)
			b.WriteString(v)
		}
	}
	return b.String()
}

func (s *twilioScheme) Verify(r Request, _ time.Time) error {
	v := r.Header.Get(twilioHeader)
	if v == "" {
		return missing(twilioHeader)
	}
	var got [sha1.Size]byte
	if err := parseTwilioHeader(&got, v); err != nil {
		return err
	}
	q, suffix, bodyHash, err := s.signedParts(r)
	if err != nil {
		return err
	}
	matched := false
	for _, m := range s.macs {
		for _, base := range s.bases {
			st := m.get()
			st.writeString(base)
			st.writeString(q)
			st.writeString(suffix)
			if hmac.Equal(st.finish(), got[:]) {
				matched = true
			}
			m.put(st)
		}
	}
	if !matched {
		return mismatch(twilioHeader)
	}
	if bodyHash != "" {
		var want [sha256.Size]byte
		if !decodeHex(want[:], bodyHash) {
			return fmt.Errorf("%s: %s is not 64 hex digits: %w", twilioHeader, twilioBodyHash, ErrMalformedSignature)
		}
		sum := sha256.Sum256(r.Body)
		if !hmac.Equal(sum[:], want[:]) {
			return fmt.Errorf("%s: body does not match %s: %w", twilioHeader, twilioBodyHash, ErrSignatureMismatch)
		}
	}
	return nil
}

// signedParts returns what Twilio signs after the configured URL: the
// query ("?…", the request's or else the configured one's) and the sorted
// form parameters (none for a JSON body, whose hash is bodyHash, taken
// from the query).
func (s *twilioScheme) signedParts(r Request) (q, suffix, bodyHash string, err error) {
	q = r.RawQuery
	if q == "" {
		q = s.pubQuery
	}
	query, _ := url.ParseQuery(q) // like Twilio's libraries: what parses counts
	bodyHash = query.Get(twilioBodyHash)
	if bodyHash == "" {
		params, err := url.ParseQuery(string(r.Body))
		if err != nil {
			return "", "", "", fmt.Errorf("%s: body is not form-encoded and the URL has no %s: %w", twilioHeader, twilioBodyHash, ErrSignatureMismatch)
		}
		suffix = formSuffix(params)
	}
	if q != "" {
		q = "?" + q
	}
	return q, suffix, bodyHash, nil
}

// writeSigned writes the query and form parameters: the URL before them
// is the configured one. A form body's bytes may differ between copies
// (order, escapes) while what is signed does not.
func (s *twilioScheme) writeSigned(w io.Writer, r Request) bool {
	q, suffix, _, err := s.signedParts(r)
	if err != nil {
		return false
	}
	_, _ = io.WriteString(w, q)
	_, _ = io.WriteString(w, suffix)
	return true
}

// sign signs body as Twilio would: a JSON body gets bodySHA256 in the
// returned query, anything else must be form-encoded.
func (s *twilioScheme) sign(body []byte, _ time.Time, msgID string) (http.Header, string, error) {
	h := http.Header{}
	q := s.pubQuery
	var suffix string
	if len(body) > 0 && json.Valid(body) {
		sum := sha256.Sum256(body)
		if q != "" {
			q += "&"
		}
		q += twilioBodyHash + "=" + hex.EncodeToString(sum[:])
		h.Set("Content-Type", "application/json")
	} else {
		params, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, "", errors.New("verify: scheme twilio signs JSON or form-encoded bodies only")
		}
		suffix = formSuffix(params)
		h.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	signed := s.bases[0]
	if q != "" {
		signed += "?" + q
	}
	st := s.macs[0].get()
	defer s.macs[0].put(st)
	st.writeString(signed + suffix)
	h.Set(twilioHeader, base64.StdEncoding.EncodeToString(st.finish()))
	if msgID != "" {
		h.Set(twilioIDHeader, msgID)
	}
	return h, q, nil
}
