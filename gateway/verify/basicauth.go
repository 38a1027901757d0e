package verify

import (
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// basicAuthScheme verifies senders that sign nothing but send HTTP basic
// credentials set in their webhook's settings (postmark, pipedrive): the
// secrets are "user:password", compared in constant time with the
// Authorization header's. Like a token, a captured request can be sent
// again: such a source relies on its event id for duplicates.
type basicAuthScheme struct {
	credentials []string
}

func newBasicAuth(secrets []string) (scheme, error) {
	for i, s := range secrets {
		if !strings.Contains(s, ":") {
			return nil, fmt.Errorf("verify.secrets[%d]: want user:password (the credentials set in the webhook's URL or settings)", i)
		}
	}
	return &basicAuthScheme{credentials: secrets}, nil
}

func (s *basicAuthScheme) Verify(r Request, _ time.Time) error {
	v := r.Header.Get("Authorization")
	if v == "" {
		return missing("Authorization")
	}
	enc, ok := strings.CutPrefix(v, "Basic ")
	if !ok || base64.StdEncoding.DecodedLen(len(enc)) > 512 {
		return malformed("Authorization", "want Basic <base64 user:password>")
	}
	var buf [512]byte
	n, err := base64.StdEncoding.Decode(buf[:], []byte(enc))
	if err != nil {
		return malformed("Authorization", "want Basic <base64 user:password>")
	}
	got := buf[:n]
	match := 0
	for _, c := range s.credentials {
		match |= subtle.ConstantTimeCompare(got, []byte(c))
	}
	if match != 1 {
		return fmt.Errorf("%s: not the configured credentials: %w", "Authorization", ErrSignatureMismatch)
	}
	return nil
}

// writeSigned: credentials sign nothing.
func (s *basicAuthScheme) writeSigned(io.Writer, Request) bool { return false }

func (s *basicAuthScheme) sign([]byte, time.Time, string) (http.Header, string, error) {
	h := http.Header{}
	h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(s.credentials[0])))
	return h, "", nil
}
