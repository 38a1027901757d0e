package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"io"
	"net/http"
	"strings"
	"time"
)

const paddleHeader = "Paddle-Signature"

// paddleTolerance is Paddle's recommended window (its docs and SDKs).
const paddleTolerance = 5 * time.Second

// paddleScheme verifies Paddle Billing: Paddle-Signature: ts=<unix>;h1=<hex
// HMAC-SHA256 of "<ts>:<body>"> with the notification destination's
// secret key; while Paddle rotates a secret it sends one h1 per secret.
type paddleScheme struct {
	macs []*mac
	tol  int64
}

// parsePaddleHeader returns ts and the h1 values of a Paddle-Signature.
func parsePaddleHeader(v string) (ts string, h1 []string, err error) {
	for item := range strings.SplitSeq(v, ";") {
		k, val, ok := strings.Cut(item, "=")
		if !ok {
			return "", nil, malformed(paddleHeader, `want "ts=…;h1=…"`)
		}
		switch k {
		case "ts":
			ts = val
		case "h1":
			h1 = append(h1, val)
		}
	}
	if ts == "" || len(h1) == 0 {
		return "", nil, malformed(paddleHeader, "want ts and h1")
	}
	return ts, h1, nil
}

func (s *paddleScheme) Verify(r Request, now time.Time) error {
	v := r.Header.Get(paddleHeader)
	if v == "" {
		return missing(paddleHeader)
	}
	ts, h1s, err := parsePaddleHeader(v)
	if err != nil {
		return err
	}
	sigs := make([][sha256.Size]byte, len(h1s))
	for i, h1 := range h1s {
		if !decodeHex(sigs[i][:], h1) {
			return malformed(paddleHeader, "h1: want 64 hex digits")
		}
	}
	if err := checkTimestamp(paddleHeader, ts, now, s.tol); err != nil {
		return err
	}
	anyH1 := func(sum []byte) bool {
		ok := false
		for i := range sigs {
			ok = ok || hmac.Equal(sum, sigs[i][:])
		}
		return ok
	}
	if firstSigner(s.macs, r.Body, anyH1, ts, ":") < 0 {
		return mismatch(paddleHeader)
	}
	return nil
}

// writeSigned writes "<ts>:<body>".
func (s *paddleScheme) writeSigned(w io.Writer, r Request) bool {
	ts, _, _ := parsePaddleHeader(r.Header.Get(paddleHeader))
	_, _ = io.WriteString(w, ts+":")
	_, _ = w.Write(r.Body)
	return true
}

func (s *paddleScheme) sign(body []byte, now time.Time, _ string) (http.Header, string, error) {
	ts, sig := s.macs[0].signTimestamped(now, ":", body)
	h := http.Header{}
	h.Set(paddleHeader, "ts="+ts+";h1="+sig)
	return h, "", nil
}
