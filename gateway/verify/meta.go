package verify

import (
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/url"
	"time"
)

// metaScheme verifies Meta's webhooks (WhatsApp Cloud API, Messenger,
// Instagram, every Graph API webhook): X-Hub-Signature-256:
// sha256=<hex HMAC-SHA256 of the raw body with the app secret>, GitHub's
// format, and answers the subscribe handshake, a GET with
// hub.mode=subscribe, hub.verify_token and hub.challenge, by echoing the
// challenge when the token is the configured verify_token.
type metaScheme struct {
	githubScheme
	verifyTokens []string
}

func newMeta(cfg Config, keys [][]byte) (scheme, error) {
	if cfg.VerifyToken == "" {
		return nil, errors.New("verify.verify_token: required for scheme meta (the token set in the app's webhook settings, answered in its subscribe handshake)")
	}
	return &metaScheme{githubScheme: githubScheme{macs: newMACs(keys, sha256New)}, verifyTokens: []string{cfg.VerifyToken}}, nil
}

// handshake answers the subscribe GET with hub.challenge as plain text.
// A GET without hub.mode is no handshake (the gateway refuses it 405); a
// wrong mode, a wrong token or an empty challenge is refused.
func (s *metaScheme) handshake(r Request, _ time.Time) (Answer, bool, error) {
	if r.Method != http.MethodGet {
		return Answer{}, false, nil
	}
	q, err := url.ParseQuery(r.RawQuery)
	if err != nil || !q.Has("hub.mode") {
		return Answer{}, false, nil
	}
	if q.Get("hub.mode") != "subscribe" {
		return Answer{}, false, refused("hub.mode", "want subscribe")
	}
	if !equalToken(q.Get("hub.verify_token"), s.verifyTokens) {
		return Answer{}, false, refused("hub.verify_token", "not the configured verify_token")
	}
	challenge := q.Get("hub.challenge")
	if challenge == "" {
		return Answer{}, false, refused("hub.challenge", "missing")
	}
	return Answer{Status: http.StatusOK, ContentType: contentTypeText, Body: []byte(challenge)}, true, nil
}

// writeSigned writes the body, all Meta signs.
func (s *metaScheme) writeSigned(w io.Writer, r Request) bool {
	_, _ = w.Write(r.Body)
	return true
}

func (s *metaScheme) sign(body []byte, _ time.Time, _ string) (http.Header, string, error) {
	st := s.macs[0].get()
	defer s.macs[0].put(st)
	st.h.Write(body)
	h := http.Header{}
	h.Set(githubHeader, githubSigPrefix+hex.EncodeToString(st.finish()))
	return h, "", nil
}
