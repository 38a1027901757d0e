package verify

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

const (
	telnyxHeader          = "Telnyx-Signature-Ed25519"
	telnyxTimestampHeader = "Telnyx-Timestamp"
)

// telnyxScheme verifies Telnyx's webhooks (API v2):
// telnyx-signature-ed25519 is the base64 Ed25519 signature of
// "<telnyx-timestamp>|<body>" under the account's public key (the
// secrets: base64, as the portal shows it); the timestamp, unix seconds,
// within the tolerance (Telnyx's SDKs allow 300 s).
type telnyxScheme struct {
	keys       []ed25519.PublicKey
	tol        int64
	signingKey string
}

func newTelnyx(cfg Config, tol int64) (scheme, error) {
	s := &telnyxScheme{tol: tol, signingKey: cfg.SigningKey}
	for i, k := range cfg.Secrets {
		b, err := base64.StdEncoding.DecodeString(k)
		if err != nil || len(b) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("verify.secrets[%d]: want the account's public key, base64 of %d bytes", i, ed25519.PublicKeySize)
		}
		s.keys = append(s.keys, ed25519.PublicKey(b))
	}
	return s, nil
}

func (s *telnyxScheme) Verify(r Request, now time.Time) error {
	v, ts, err := timestampedHeaders(r, telnyxHeader, telnyxTimestampHeader)
	if err != nil {
		return err
	}
	var sig [ed25519.SignatureSize]byte
	if !decodeBase64(sig[:], v) {
		return malformed(telnyxHeader, fmt.Sprintf("want base64 of %d bytes", ed25519.SignatureSize))
	}
	if err := checkTimestamp(telnyxTimestampHeader, ts, now, s.tol); err != nil {
		return err
	}
	msg := make([]byte, 0, len(ts)+1+len(r.Body))
	msg = append(append(append(msg, ts...), '|'), r.Body...)
	for _, k := range s.keys {
		if ed25519.Verify(k, msg, sig[:]) {
			return nil
		}
	}
	return mismatch(telnyxHeader)
}

// writeSigned writes "<timestamp>|<body>".
func (s *telnyxScheme) writeSigned(w io.Writer, r Request) bool {
	_, _ = io.WriteString(w, r.Header.Get(telnyxTimestampHeader)+"|")
	_, _ = w.Write(r.Body)
	return true
}

func (s *telnyxScheme) sign(body []byte, now time.Time, _ string) (http.Header, string, error) {
	if s.signingKey == "" {
		return nil, "", errNoSigningKey
	}
	priv, err := ed25519SigningKey(s.signingKey)
	if err != nil {
		return nil, "", err
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	h := http.Header{}
	h.Set(telnyxTimestampHeader, ts)
	h.Set(telnyxHeader, base64.StdEncoding.EncodeToString(ed25519.Sign(priv, append([]byte(ts+"|"), body...))))
	return h, "", nil
}

// ed25519SigningKey reads a seed or private key in hex or base64.
func ed25519SigningKey(k string) (ed25519.PrivateKey, error) {
	b, err := hex.DecodeString(k)
	if err != nil {
		b, err = base64.StdEncoding.DecodeString(k)
	}
	switch {
	case err == nil && len(b) == ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(b), nil
	case err == nil && len(b) == ed25519.PrivateKeySize:
		return ed25519.PrivateKey(b), nil
	}
	return nil, fmt.Errorf("signing key: want an Ed25519 seed (%d bytes) or private key (%d), hex or base64", ed25519.SeedSize, ed25519.PrivateKeySize)
}
