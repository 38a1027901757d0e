package verify

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

const (
	sendgridHeader          = "X-Twilio-Email-Event-Webhook-Signature"
	sendgridTimestampHeader = "X-Twilio-Email-Event-Webhook-Timestamp"
	// sendgridMaxSignature bounds the base64 of an ASN.1 DER P-256
	// signature (at most 72 bytes) with room to spare.
	sendgridMaxSignature = 128
)

// sendgridScheme verifies SendGrid's signed Event Webhook: the header
// X-Twilio-Email-Event-Webhook-Signature holds the base64 ASN.1 DER
// ECDSA P-256 signature of SHA-256(timestamp + body), the timestamp in
// X-Twilio-Email-Event-Webhook-Timestamp; the secrets are the
// verification keys SendGrid shows (base64 DER public keys). SendGrid
// documents no timestamp tolerance; the timestamp is signed, so webhookd
// applies its own (verify.tolerance) against replays.
type sendgridScheme struct {
	keys       []*ecdsa.PublicKey
	tol        int64
	signingKey string // Config.SigningKey, for sign only
}

func newSendGrid(cfg Config, tol int64) (scheme, error) {
	s := &sendgridScheme{tol: tol, signingKey: cfg.SigningKey}
	for i, k := range cfg.Secrets {
		der, err := base64.StdEncoding.DecodeString(k)
		if err != nil {
			return nil, fmt.Errorf("verify.secrets[%d]: want the verification key SendGrid shows (base64)", i)
		}
		pub, err := x509.ParsePKIXPublicKey(der)
		ec, ok := pub.(*ecdsa.PublicKey)
		if err != nil || !ok || ec.Curve != elliptic.P256() {
			return nil, fmt.Errorf("verify.secrets[%d]: not an ECDSA P-256 public key", i)
		}
		s.keys = append(s.keys, ec)
	}
	return s, nil
}

func (s *sendgridScheme) Verify(r Request, now time.Time) error {
	v, ts, err := timestampedHeaders(r, sendgridHeader, sendgridTimestampHeader)
	if err != nil {
		return err
	}
	if len(v) > sendgridMaxSignature {
		return malformed(sendgridHeader, "too long for a P-256 signature")
	}
	sig, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return malformed(sendgridHeader, "want base64")
	}
	if err := checkTimestamp(sendgridTimestampHeader, ts, now, s.tol); err != nil {
		return err
	}
	h := sha256.New()
	_, _ = io.WriteString(h, ts)
	h.Write(r.Body)
	digest := h.Sum(nil)
	for _, k := range s.keys {
		if ecdsa.VerifyASN1(k, digest, sig) {
			return nil
		}
	}
	return mismatch(sendgridHeader)
}

// writeSigned writes timestamp + body.
func (s *sendgridScheme) writeSigned(w io.Writer, r Request) bool {
	_, _ = io.WriteString(w, r.Header.Get(sendgridTimestampHeader))
	_, _ = w.Write(r.Body)
	return true
}

func (s *sendgridScheme) sign(body []byte, now time.Time, _ string) (http.Header, string, error) {
	if s.signingKey == "" {
		return nil, "", errNoSigningKey
	}
	priv, err := parseECPrivateKey(s.signingKey)
	if err != nil {
		return nil, "", err
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	digest := sha256.Sum256(append([]byte(ts), body...))
	sig, err := ecdsa.SignASN1(rand.Reader, priv, digest[:])
	if err != nil {
		return nil, "", fmt.Errorf("signing: %w", err)
	}
	h := http.Header{}
	h.Set(sendgridTimestampHeader, ts)
	h.Set(sendgridHeader, base64.StdEncoding.EncodeToString(sig))
	return h, "", nil
}

// parseECPrivateKey reads a base64 DER P-256 private key, SEC 1 or
// PKCS #8.
func parseECPrivateKey(s string) (*ecdsa.PrivateKey, error) {
	errKey := errors.New("signing key: want a base64 DER ECDSA P-256 private key (SEC 1 or PKCS #8)")
	der, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, errKey
	}
	if k, err := x509.ParseECPrivateKey(der); err == nil && k.Curve == elliptic.P256() {
		return k, nil
	}
	if k, err := x509.ParsePKCS8PrivateKey(der); err == nil {
		if ec, ok := k.(*ecdsa.PrivateKey); ok && ec.Curve == elliptic.P256() {
			return ec, nil
		}
	}
	return nil, errKey
}
