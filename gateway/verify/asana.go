package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync/atomic"
	"time"
)

const (
	asanaHeader       = "X-Hook-Signature"
	asanaSecretHeader = "X-Hook-Secret"
)

// asanaScheme verifies Asana's webhooks: X-Hook-Signature is the hex
// HMAC-SHA256 of the body under the webhook's secret, which Asana sends
// once, in X-Hook-Secret, in the handshake it makes while the webhook is
// created; the handshake is answered by echoing that header. The secret
// so learned is stored by the caller (the gateway: first handshake wins,
// SECURITY.md) and handed back with LearnSecret, here and in every other
// process; configured secrets, if any, also verify.
type asanaScheme struct {
	configured []*mac
	learned    atomic.Pointer[learnedSecrets]
}

// learnedSecrets are the secrets handshakes delivered, with their HMAC
// states; replaced whole on each change.
type learnedSecrets struct {
	secrets []string
	macs    []*mac
}

// SecretLearner is a Verifier whose secret arrives in its sender's
// handshake (asana): the caller stores the handshake's
// Answer.LearnedSecret, then calls LearnSecret, and calls it at start
// with each stored secret.
type SecretLearner interface {
	Verifier
	// LearnSecret adds secret to those that verify.
	LearnSecret(secret string)
}

func newAsana(secrets []string) *asanaScheme {
	keys := make([][]byte, len(secrets))
	for i, s := range secrets {
		keys[i] = []byte(s)
	}
	return &asanaScheme{configured: newMACs(keys, sha256New)}
}

// LearnSecret adds secret (idempotently).
func (s *asanaScheme) LearnSecret(secret string) {
	for {
		old := s.learned.Load()
		next := &learnedSecrets{}
		if old != nil {
			if slices.Contains(old.secrets, secret) {
				return
			}
			next.secrets, next.macs = slices.Clone(old.secrets), slices.Clone(old.macs)
		}
		next.secrets = append(next.secrets, secret)
		next.macs = append(next.macs, newMACs([][]byte{[]byte(secret)}, sha256New)...)
		if s.learned.CompareAndSwap(old, next) {
			return
		}
	}
}

func (s *asanaScheme) Verify(r Request, _ time.Time) error {
	v := r.Header.Get(asanaHeader)
	if v == "" {
		return missing(asanaHeader)
	}
	var got [sha256.Size]byte
	if !decodeHex(got[:], v) {
		return malformed(asanaHeader, "want 64 hex digits")
	}
	learned := s.learned.Load()
	if len(s.configured) == 0 && learned == nil {
		return fmt.Errorf("%s: no secret yet (Asana's handshake delivers it): %w", asanaHeader, ErrSignatureMismatch)
	}
	match := func(sum []byte) bool { return hmac.Equal(sum, got[:]) }
	if firstSigner(s.configured, r.Body, match) >= 0 || learned != nil && firstSigner(learned.macs, r.Body, match) >= 0 {
		return nil
	}
	return mismatch(asanaHeader)
}

// maxHookSecret bounds a learned secret (Asana's are 32 hex digits).
const maxHookSecret = 256

// handshake answers Asana's handshake, a POST carrying X-Hook-Secret,
// by echoing the header; the secret is the answer's LearnedSecret, for
// the caller to store before it answers.
func (s *asanaScheme) handshake(r Request, _ time.Time) (Answer, bool, error) {
	secret := r.Header.Get(asanaSecretHeader)
	if r.Method != http.MethodPost || secret == "" {
		return Answer{}, false, nil
	}
	if len(secret) > maxHookSecret || !printableASCII(secret) {
		return Answer{}, false, refused(asanaSecretHeader, "not a hook secret")
	}
	h := http.Header{}
	h.Set(asanaSecretHeader, secret)
	return Answer{Status: http.StatusOK, Header: h, LearnedSecret: secret}, true, nil
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// writeSigned writes the body.
func (s *asanaScheme) writeSigned(w io.Writer, r Request) bool {
	_, _ = w.Write(r.Body)
	return true
}

// sign signs with the first configured secret, else the first learned.
func (s *asanaScheme) sign(body []byte, _ time.Time, _ string) (http.Header, string, error) {
	macs := s.configured
	if l := s.learned.Load(); len(macs) == 0 && l != nil {
		macs = l.macs
	}
	if len(macs) == 0 {
		return nil, "", fmt.Errorf("asana: no secret to sign with (configure the webhook's X-Hook-Secret in verify.secrets)")
	}
	st := macs[0].get()
	defer macs[0].put(st)
	st.h.Write(body)
	h := http.Header{}
	h.Set(asanaHeader, hex.EncodeToString(st.finish()))
	return h, "", nil
}
