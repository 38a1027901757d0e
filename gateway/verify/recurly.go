package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

const recurlyHeader = "Recurly-Signature"

// recurlyScheme verifies Recurly's webhooks: recurly-signature is
// "<timestamp ms>,<hex>[,<hex>…]", each hex an HMAC-SHA256 of
// "<timestamp>.<body>" under one of the endpoint's keys (one per key
// while Recurly rotates); the timestamp within the tolerance.
type recurlyScheme struct {
	macs []*mac
	tol  int64
}

func newRecurly(secrets []string, tol int64) scheme {
	keys := make([][]byte, len(secrets))
	for i, s := range secrets {
		keys[i] = []byte(s)
	}
	return &recurlyScheme{macs: newMACs(keys, sha256New), tol: tol}
}

func (s *recurlyScheme) Verify(r Request, now time.Time) error {
	v := r.Header.Get(recurlyHeader)
	if v == "" {
		return missing(recurlyHeader)
	}
	ts, rest, ok := strings.Cut(v, ",")
	var sigs [maxSignatures][sha256.Size]byte
	n := 0
	for ok && rest != "" && n < maxSignatures {
		var item string
		item, rest, _ = strings.Cut(rest, ",")
		if decodeHex(sigs[n][:], strings.TrimSpace(item)) {
			n++
		}
	}
	if n == 0 {
		return malformed(recurlyHeader, "want <timestamp>,<64 hex digits>[,…]")
	}
	ms, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || ts[0] == '+' || ts[0] == '-' {
		return malformed(recurlyHeader, "want a timestamp in milliseconds first")
	}
	if d := now.UnixMilli() - ms; d > s.tol*1000 || d < -s.tol*1000 {
		return fmt.Errorf("%s: %w", recurlyHeader, ErrTimestampOutsideTolerance)
	}
	anySig := func(sum []byte) bool {
		match := false
		for i := range n {
			match = match || hmac.Equal(sum, sigs[i][:])
		}
		return match
	}
	if firstSigner(s.macs, r.Body, anySig, ts, ".") < 0 {
		return mismatch(recurlyHeader)
	}
	return nil
}

// writeSigned writes "<timestamp>.<body>".
func (s *recurlyScheme) writeSigned(w io.Writer, r Request) bool {
	ts, _, _ := strings.Cut(r.Header.Get(recurlyHeader), ",")
	_, _ = io.WriteString(w, ts+".")
	_, _ = w.Write(r.Body)
	return true
}

func (s *recurlyScheme) sign(body []byte, now time.Time, _ string) (http.Header, string, error) {
	st := s.macs[0].get()
	defer s.macs[0].put(st)
	ts := strconv.FormatInt(now.UnixMilli(), 10)
	st.writeString(ts + ".")
	st.h.Write(body)
	h := http.Header{}
	h.Set(recurlyHeader, ts+","+fmt.Sprintf("%x", st.finish()))
	return h, "", nil
}
