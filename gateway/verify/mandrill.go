package verify

import (
	"crypto/hmac"
	"crypto/sha1"
	"errors"
	"io"
	"net/http"
	"net/url"
	"time"
)

const mandrillHeader = "X-Mandrill-Signature"

// mandrillScheme verifies Mailchimp Transactional (Mandrill) webhooks:
// X-Mandrill-Signature is the base64 HMAC-SHA1, with the webhook's key,
// of the webhook URL (public_url, exactly as added in Mandrill) followed
// by every POST parameter's name and value, sorted by name — Twilio's
// construction (twilio.go's formSuffix), under another header. Mandrill
// checks the URL with a HEAD before saving a webhook: answered 200.
type mandrillScheme struct {
	macs []*mac
	url  string
}

func newMandrill(cfg Config) (scheme, error) {
	if cfg.PublicURL == "" {
		return nil, errors.New("verify.public_url: required for scheme mailchimp (the webhook URL exactly as added in Mandrill)")
	}
	keys := make([][]byte, len(cfg.Secrets))
	for i, s := range cfg.Secrets {
		keys[i] = []byte(s)
	}
	return &mandrillScheme{macs: newMACs(keys, sha1.New), url: cfg.PublicURL}, nil
}

func (s *mandrillScheme) Verify(r Request, _ time.Time) error {
	v := r.Header.Get(mandrillHeader)
	if v == "" {
		return missing(mandrillHeader)
	}
	var got [sha1.Size]byte
	if !decodeBase64(got[:], v) {
		return malformed(mandrillHeader, "want base64 of 20 bytes")
	}
	form, err := url.ParseQuery(string(r.Body))
	if err != nil {
		return malformed(mandrillHeader, "the body is not a form (mandrill_events=…)")
	}
	signed := s.url + formSuffix(form)
	if firstSigner(s.macs, nil, func(sum []byte) bool { return hmac.Equal(sum, got[:]) }, signed) < 0 {
		return mismatch(mandrillHeader)
	}
	return nil
}

func (s *mandrillScheme) handshake(r Request, now time.Time) (Answer, bool, error) {
	return headCheck(nil, r, now)
}

// writeSigned writes the URL and the sorted parameters: one request
// whatever the order or encoding of its form.
func (s *mandrillScheme) writeSigned(w io.Writer, r Request) bool {
	form, _ := url.ParseQuery(string(r.Body))
	_, _ = io.WriteString(w, s.url+formSuffix(form))
	return true
}

func (s *mandrillScheme) sign(body []byte, _ time.Time, _ string) (http.Header, string, error) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, "", errors.New("mailchimp signs a form body (mandrill_events=…)")
	}
	st := s.macs[0].get()
	defer s.macs[0].put(st)
	st.writeString(s.url + formSuffix(form))
	h := http.Header{}
	h.Set(mandrillHeader, b64Strict.EncodeToString(st.finish()))
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	return h, "", nil
}
