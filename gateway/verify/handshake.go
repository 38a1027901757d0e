package verify

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
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
	// Header holds headers the answer must carry (Asana's X-Hook-Secret
	// echoed back).
	Header http.Header
	// LearnedSecret is a signing secret the handshake delivered (Asana's
	// X-Hook-Secret): the caller stores it, answers only once it is
	// stored as the source's one secret, then hands it to the Verifier
	// ([SecretLearner]).
	LearnedSecret string
	// Note, when set, is what the caller logs about the handshake: what
	// an operator must do (sns's SubscribeURL, to visit when
	// subscription_confirmation is show).
	Note string
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

// contextHandshaker is implemented by the schemes whose handshake does
// I/O (sns confirms a subscription).
type contextHandshaker interface {
	handshakeContext(ctx context.Context, r Request, now time.Time) (a Answer, ok bool, err error)
}

// HandshakeContext is Handshake for a caller with a context: the
// handshakes that do I/O (sns fetches a certificate and confirms a
// subscription) stop when ctx ends.
func HandshakeContext(ctx context.Context, v Verifier, r Request, now time.Time) (a Answer, ok bool, err error) {
	if h, ok := v.(contextHandshaker); ok {
		return h.handshakeContext(ctx, r, now)
	}
	return Handshake(v, r, now)
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
