package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"hash"
	"io"
	"net/http"
	"strings"
	"time"
)

const stripeHeader = "Stripe-Signature"

func sha256New() hash.Hash { return sha256.New() }

// stripeScheme verifies Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>].
type stripeScheme struct {
	macs []*mac
	tol  int64
}

// parseStripeHeader checks the shape of a Stripe-Signature value and
// returns its timestamp and how many v1 entries it has. Items are
// comma-separated key=value pairs; exactly one t, all digits; other keys
// (v0, future schemes) are ignored.
func parseStripeHeader(v string) (t string, v1 int, err error) {
	seenT := false
	for rest := v; ; {
		item, next, more := strings.Cut(rest, ",")
		k, val, ok := strings.Cut(item, "=")
		if !ok || k == "" {
			return "", 0, malformed(stripeHeader, "want comma-separated key=value items")
		}
		switch k {
		case "t":
			if seenT {
				return "", 0, malformed(stripeHeader, "more than one t")
			}
			if !allDigits(val) {
				return "", 0, malformed(stripeHeader, "t is not a unix timestamp")
			}
			seenT, t = true, val
		case "v1":
			v1++
		}
		if !more {
			break
		}
		rest = next
	}
	if !seenT {
		return "", 0, malformed(stripeHeader, "no t")
	}
	return t, v1, nil
}

func (s *stripeScheme) Verify(r Request, now time.Time) error {
	v := r.Header.Get(stripeHeader)
	if v == "" {
		return missing(stripeHeader)
	}
	t, n, err := parseStripeHeader(v)
	if err != nil {
		return err
	}
	if err := checkTimestamp(stripeHeader, t, now, s.tol); err != nil {
		return err
	}
	if n == 0 {
		return malformed(stripeHeader, "no v1 signature")
	}
	if firstSigner(s.macs, r.Body, func(sum []byte) bool { return stripeMatch(v, sum) }, t, ".") < 0 {
		return mismatch(stripeHeader)
	}
	return nil
}

// stripeMatch reports whether any v1 entry of v equals want.
func stripeMatch(v string, want []byte) bool {
	var got [sha256.Size]byte
	found := false
	for rest := v; ; {
		item, next, more := strings.Cut(rest, ",")
		if val, ok := strings.CutPrefix(item, "v1="); ok {
			if decodeHex(got[:], val) && hmac.Equal(got[:], want) {
				found = true // keep going: constant work regardless of position
			}
		}
		if !more {
			return found
		}
		rest = next
	}
}

// writeSigned writes "<t>.<body>".
func (s *stripeScheme) writeSigned(w io.Writer, r Request) bool {
	t, _, err := parseStripeHeader(r.Header.Get(stripeHeader))
	if err != nil {
		return false
	}
	_, _ = io.WriteString(w, t+".")
	_, _ = w.Write(r.Body)
	return true
}

func (s *stripeScheme) sign(body []byte, now time.Time, _ string) (http.Header, string, error) {
	ts, sig := s.macs[0].signTimestamped(now, ".", body)
	h := http.Header{}
	h.Set(stripeHeader, "t="+ts+",v1="+sig)
	return h, "", nil
}

func allDigits(s string) bool {
	if s == "" || len(s) > 18 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
