package verify

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// Presets: senders whose signature is the generic hmac-sha256 mechanism
// with fixed settings (genericScheme), plus what a sender adds on top.

const (
	razorpayHeader   = "X-Razorpay-Signature"
	razorpayIDHeader = "X-Razorpay-Event-Id"
	linearHeader     = "Linear-Signature"
	linearIDHeader   = "Linear-Delivery"
	squareHeader     = "X-Square-Hmacsha256-Signature" // canonical form of x-square-hmacsha256-signature
)

// preset is the generic scheme with fixed settings and no prefix.
func preset(keys [][]byte, header string, b64 bool, segs ...segment) *genericScheme {
	if len(segs) == 0 {
		segs = []segment{{kind: segBody}}
	}
	return &genericScheme{macs: newMACs(keys, sha256New), header: http.CanonicalHeaderKey(header), base64: b64, segments: segs}
}

// idPreset is a preset whose sender also sends its message id in a
// header, which sign fills (unsigned, like GitHub's delivery id).
type idPreset struct {
	*genericScheme
	idHeader string
}

func (s idPreset) sign(body []byte, now time.Time, msgID string) (http.Header, string, error) {
	h, q, err := s.genericScheme.sign(body, now, msgID)
	if err == nil && msgID != "" {
		h.Set(s.idHeader, msgID)
	}
	return h, q, err
}

// newRazorpay: X-Razorpay-Signature is the hex HMAC-SHA256 of the body
// with the webhook secret; X-Razorpay-Event-Id names the event.
func newRazorpay(keys [][]byte) scheme {
	return idPreset{preset(keys, razorpayHeader, false), razorpayIDHeader}
}

// linearScheme: Linear-Signature is the hex HMAC-SHA256 of the body with
// the webhook's signing secret, and the body's webhookTimestamp (unix
// milliseconds, signed with the body) must be within the tolerance
// (Linear's SDK allows one minute, the default here).
type linearScheme struct {
	idPreset
	tol time.Duration
}

// linearTolerance is Linear's own window (its SDK's verify).
const linearTolerance = time.Minute

func newLinear(keys [][]byte, tol time.Duration) scheme {
	return &linearScheme{idPreset{preset(keys, linearHeader, false), linearIDHeader}, tol}
}

func (s *linearScheme) Verify(r Request, now time.Time) error {
	if err := s.genericScheme.Verify(r, now); err != nil {
		return err
	}
	ts := gjson.GetBytes(r.Body, "webhookTimestamp")
	if !ts.Exists() {
		return fmt.Errorf("webhookTimestamp: %w", ErrMissingSignature)
	}
	ms, err := strconv.ParseInt(ts.Raw, 10, 64)
	if ts.Type != gjson.Number || err != nil {
		return malformed("webhookTimestamp", "want unix milliseconds")
	}
	if d := now.Sub(time.UnixMilli(ms)); d > s.tol || d < -s.tol {
		return fmt.Errorf("webhookTimestamp: %w", ErrTimestampOutsideTolerance)
	}
	return nil
}

// newSquare: x-square-hmacsha256-signature is the base64 HMAC-SHA256 of
// the notification URL (public_url, exactly as set in Square's
// dashboard) followed by the body, with the subscription's signature key.
func newSquare(cfg Config, keys [][]byte) (scheme, error) {
	if cfg.PublicURL == "" {
		return nil, errors.New("verify.public_url: required for scheme square (the notification URL exactly as set in Square's dashboard)")
	}
	u, err := url.Parse(cfg.PublicURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Contains(cfg.PublicURL, "#") {
		return nil, errors.New("verify.public_url: want an absolute http(s) URL without fragment, as Square sends to it")
	}
	return preset(keys, squareHeader, true, segment{kind: segLiteral, lit: []byte(cfg.PublicURL)}, segment{kind: segBody}), nil
}
