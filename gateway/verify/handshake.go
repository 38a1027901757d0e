package verify

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"time"
)

// ErrHandshakeRefused is returned by Handshake when a request is a
// sender's handshake but carries the wrong verify token (Meta's subscribe
// GET). The gateway answers 403 and records nothing.
var ErrHandshakeRefused = errors.New("handshake refused")

// Answer is a handshake's answer.
type Answer struct {
	// Status is the HTTP status: 200, or 204 with no body (Discord's
	// webhook-event PING).
	Status int
	// ContentType is "application/json" or "text/plain; charset=utf-8".
	ContentType string
	// Body is the answer's exact bytes.
	Body []byte
}

const (
	contentTypeJSON = "application/json"
	contentTypeText = "text/plain; charset=utf-8"
)

// handshaker is implemented by the schemes whose senders send a handshake
// before (or between) their events: slack's url_verification, meta's
// subscribe GET, zoom's endpoint.url_validation, discord's PING and
// msgraph's validationToken. Every handshake lives in its scheme's file.
type handshaker interface {
	// handshake answers r when r is the scheme's handshake (ok true), or
	// refuses it (err: a verification error, 401, or
	// ErrHandshakeRefused, 403). A signed handshake is verified here,
	// before it is answered. ok false and no error: r is not a handshake.
	handshake(r Request, now time.Time) (a Answer, ok bool, err error)
}

// Handshake answers r when it is the handshake of v's scheme, before and
// instead of recording anything: call it before Verify on every request.
// ok is false (and err nil) for a request that is no handshake, which is
// then verified and recorded as usual. err wraps one of Verify's errors
// (a handshake that should have been signed and was not) or
// ErrHandshakeRefused (a wrong verify token).
func Handshake(v Verifier, r Request, now time.Time) (a Answer, ok bool, err error) {
	h, isHandshaker := v.(handshaker)
	if !isHandshaker {
		return Answer{}, false, nil
	}
	return h.handshake(r, now)
}

// equalToken reports in constant time whether got equals one of tokens.
func equalToken(got string, tokens []string) bool {
	match := 0
	for _, t := range tokens {
		match |= subtle.ConstantTimeCompare([]byte(got), []byte(t))
	}
	return match == 1
}

func refused(field, why string) error {
	return fmt.Errorf("%s: %s: %w", field, why, ErrHandshakeRefused)
}
