package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"time"
)

const (
	githubHeader    = "X-Hub-Signature-256"
	githubIDHeader  = "X-Github-Delivery" // canonical form of X-GitHub-Delivery
	githubSigPrefix = "sha256="
)

// githubScheme verifies X-Hub-Signature-256: sha256=<hex> over the body.
type githubScheme struct {
	macs []*mac
}

// parseGitHubHeader decodes an X-Hub-Signature-256 value into dst.
func parseGitHubHeader(dst *[sha256.Size]byte, v string) error {
	hexSig, ok := strings.CutPrefix(v, githubSigPrefix)
	if !ok {
		return malformed(githubHeader, `want "sha256=" prefix`)
	}
	if !decodeHex(dst[:], hexSig) {
		return malformed(githubHeader, "want 64 hex digits")
	}
	return nil
}

func (s *githubScheme) Verify(r Request, _ time.Time) error {
	v := r.Header.Get(githubHeader)
	if v == "" {
		return missing(githubHeader)
	}
	var got [sha256.Size]byte
	if err := parseGitHubHeader(&got, v); err != nil {
		return err
	}
	return bodyMAC(s.macs, r.Body, got[:], githubHeader)
}

// bodyMAC reports whether HMAC(body) under any secret equals got.
func bodyMAC(macs []*mac, body, got []byte, header string) error {
	if firstSigner(macs, body, func(sum []byte) bool { return hmac.Equal(sum, got) }) < 0 {
		return mismatch(header)
	}
	return nil
}

// writeSigned writes the body, all GitHub signs.
func (s *githubScheme) writeSigned(w io.Writer, r Request) bool {
	_, _ = w.Write(r.Body)
	return true
}

func (s *githubScheme) sign(body []byte, _ time.Time, msgID string) (http.Header, string, error) {
	st := s.macs[0].get()
	defer s.macs[0].put(st)
	st.h.Write(body)
	h := http.Header{}
	h.Set(githubHeader, githubSigPrefix+hex.EncodeToString(st.finish()))
	if msgID != "" {
		h.Set(githubIDHeader, msgID)
	}
	return h, "", nil
}
