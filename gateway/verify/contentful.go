package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

const (
	contentfulHeader              = "X-Contentful-Signature"
	contentfulSignedHeadersHeader = "X-Contentful-Signed-Headers"
	contentfulTimestampHeader     = "X-Contentful-Timestamp"
)

// contentfulTolerance is the window of Contentful's own verifier
// (node-apps-toolkit's verifyRequest: 30 seconds).
const contentfulTolerance = 30 * time.Second

// contentfulScheme verifies Contentful's signed webhook requests, as
// node-apps-toolkit's signRequest builds them: x-contentful-signature is
// the hex HMAC-SHA256 of the canonical request, the method, the path,
// the signed headers ("name:value" joined by ";", names lowercased and
// sorted, values trimmed: those x-contentful-signed-headers lists, which
// include itself and x-contentful-timestamp) and the body, joined by
// newlines; x-contentful-timestamp (ms) within the tolerance.
type contentfulScheme struct {
	macs []*mac
	path string
	tol  int64
}

func newContentful(cfg Config, tol int64) (scheme, error) {
	if cfg.PublicURL == "" {
		return nil, errors.New("verify.public_url: required for scheme contentful (the webhook URL as set in Contentful: its path is signed)")
	}
	u, err := url.Parse(cfg.PublicURL)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, errors.New("verify.public_url: want an absolute URL without query or fragment")
	}
	keys := make([][]byte, len(cfg.Secrets))
	for i, s := range cfg.Secrets {
		keys[i] = []byte(s)
	}
	return &contentfulScheme{macs: newMACs(keys, sha256New), path: u.EscapedPath(), tol: tol}, nil
}

// canonical returns the signed request up to the body (which follows),
// or an error naming the header.
func (s *contentfulScheme) canonical(r Request) (string, error) {
	list := r.Header.Get(contentfulSignedHeadersHeader)
	if list == "" {
		return "", missing(contentfulSignedHeadersHeader)
	}
	names := strings.Split(strings.ToLower(list), ",")
	for i := range names {
		names[i] = strings.TrimSpace(names[i])
	}
	if !slices.Contains(names, "x-contentful-timestamp") || !slices.Contains(names, "x-contentful-signed-headers") {
		return "", malformed(contentfulSignedHeadersHeader, "want x-contentful-timestamp and x-contentful-signed-headers signed")
	}
	slices.Sort(names)
	names = slices.Compact(names)
	pairs := make([]string, len(names))
	for i, n := range names {
		pairs[i] = n + ":" + strings.TrimSpace(r.Header.Get(n))
	}
	method := r.Method
	if method == "" {
		method = http.MethodPost
	}
	return method + "\n" + s.path + "\n" + strings.Join(pairs, ";") + "\n", nil
}

func (s *contentfulScheme) Verify(r Request, now time.Time) error {
	v, ts, err := timestampedHeaders(r, contentfulHeader, contentfulTimestampHeader)
	if err != nil {
		return err
	}
	var got [sha256.Size]byte
	if !decodeHex(got[:], v) {
		return malformed(contentfulHeader, "want 64 hex digits")
	}
	ms, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || ts[0] == '+' || ts[0] == '-' {
		return malformed(contentfulTimestampHeader, "want unix milliseconds")
	}
	if d := now.UnixMilli() - ms; d > s.tol*1000 || d < -s.tol*1000 {
		return fmt.Errorf("%s: %w", contentfulTimestampHeader, ErrTimestampOutsideTolerance)
	}
	c, err := s.canonical(r)
	if err != nil {
		return err
	}
	if firstSigner(s.macs, r.Body, func(sum []byte) bool { return hmac.Equal(sum, got[:]) }, c) < 0 {
		return mismatch(contentfulHeader)
	}
	return nil
}

// writeSigned writes the canonical request.
func (s *contentfulScheme) writeSigned(w io.Writer, r Request) bool {
	c, _ := s.canonical(r)
	_, _ = io.WriteString(w, c)
	_, _ = w.Write(r.Body)
	return true
}

func (s *contentfulScheme) sign(body []byte, now time.Time, _ string) (http.Header, string, error) {
	h := http.Header{}
	h.Set(contentfulTimestampHeader, strconv.FormatInt(now.UnixMilli(), 10))
	h.Set(contentfulSignedHeadersHeader, "x-contentful-signed-headers,x-contentful-timestamp")
	c, _ := s.canonical(Request{Method: http.MethodPost, Header: h, Body: body})
	st := s.macs[0].get()
	defer s.macs[0].put(st)
	st.writeString(c)
	st.h.Write(body)
	h.Set(contentfulHeader, fmt.Sprintf("%x", st.finish()))
	return h, "", nil
}
