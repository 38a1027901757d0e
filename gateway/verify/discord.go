package verify

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"filippo.io/edwards25519"
	"github.com/tidwall/gjson"

	"github.com/webhookd/webhookd/internal/jsonlimit"
)

const (
	discordHeader          = "X-Signature-Ed25519"
	discordTimestampHeader = "X-Signature-Timestamp"
)

// discordScheme verifies Discord's interactions and webhook events:
// X-Signature-Ed25519 holds the hex Ed25519 signature of
// X-Signature-Timestamp + body under the application's public key (the
// secrets: hex, as the developer portal shows it). Discord documents no
// timestamp tolerance; the timestamp is signed, so webhookd applies its
// own (verify.tolerance) against replays. Its PINGs are handshakes.
type discordScheme struct {
	keys       []ed25519.PublicKey
	tol        int64
	signingKey string // Config.SigningKey, for sign only
}

func newDiscord(cfg Config, tol int64) (scheme, error) {
	s := &discordScheme{tol: tol, signingKey: cfg.SigningKey}
	secrets := cfg.Secrets
	for i, k := range secrets {
		b, err := hex.DecodeString(k)
		if err != nil || len(b) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("verify.secrets[%d]: want the application's public key, %d hex digits", i, 2*ed25519.PublicKeySize)
		}
		if err := checkEd25519Key(b); err != nil {
			return nil, fmt.Errorf("verify.secrets[%d]: %w", i, err)
		}
		s.keys = append(s.keys, ed25519.PublicKey(b))
	}
	return s, nil
}

func (s *discordScheme) Verify(r Request, now time.Time) error {
	v, ts, err := timestampedHeaders(r, discordHeader, discordTimestampHeader)
	if err != nil {
		return err
	}
	var sig [ed25519.SignatureSize]byte
	if !decodeHex(sig[:], v) {
		return malformed(discordHeader, fmt.Sprintf("want %d hex digits", 2*ed25519.SignatureSize))
	}
	if err := checkTimestamp(discordTimestampHeader, ts, now, s.tol); err != nil {
		return err
	}
	msg := make([]byte, 0, len(ts)+len(r.Body))
	msg = append(append(msg, ts...), r.Body...)
	for _, k := range s.keys {
		if ed25519.Verify(k, msg, sig[:]) {
			return nil
		}
	}
	return mismatch(discordHeader)
}

// handshake answers PINGs once their signature verified: an interaction
// PING ({"type":1}, no "event") with {"type":1}, a webhook-event PING
// ({"type":0,"version":1,…}) with 204 and no body, as Discord documents
// each.
func (s *discordScheme) handshake(r Request, now time.Time) (Answer, bool, error) {
	if r.Method != http.MethodPost || !jsonlimit.Valid(r.Body) {
		return Answer{}, false, nil
	}
	f := gjson.GetManyBytes(r.Body, "type", "event", "version")
	if f[0].Type != gjson.Number {
		return Answer{}, false, nil
	}
	var a Answer
	switch {
	case f[0].Raw == "1" && !f[1].Exists():
		a = Answer{Status: http.StatusOK, ContentType: contentTypeJSON, Body: []byte(`{"type":1}`)}
	case f[0].Raw == "0" && f[2].Exists():
		a = Answer{Status: http.StatusNoContent}
	default:
		return Answer{}, false, nil
	}
	if err := s.Verify(r, now); err != nil {
		return Answer{}, false, err
	}
	return a, true, nil
}

// writeSigned writes timestamp + body.
func (s *discordScheme) writeSigned(w io.Writer, r Request) bool {
	_, _ = io.WriteString(w, r.Header.Get(discordTimestampHeader))
	_, _ = w.Write(r.Body)
	return true
}

// errNoSigningKey is Sign's error for a public-key scheme without
// Config.SigningKey.
var errNoSigningKey = errors.New("this scheme's secrets are public keys: signing needs the sender's private key (webhookd send --signing-key)")

func (s *discordScheme) sign(body []byte, now time.Time, _ string) (http.Header, string, error) {
	if s.signingKey == "" {
		return nil, "", errNoSigningKey
	}
	b, err := hex.DecodeString(s.signingKey)
	var priv ed25519.PrivateKey
	switch {
	case err == nil && len(b) == ed25519.SeedSize:
		priv = ed25519.NewKeyFromSeed(b)
	case err == nil && len(b) == ed25519.PrivateKeySize:
		priv = ed25519.PrivateKey(b)
	default:
		return nil, "", fmt.Errorf("signing key: want a hex Ed25519 seed (%d hex digits) or private key (%d)", 2*ed25519.SeedSize, 2*ed25519.PrivateKeySize)
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	h := http.Header{}
	h.Set(discordTimestampHeader, ts)
	h.Set(discordHeader, hex.EncodeToString(ed25519.Sign(priv, append([]byte(ts), body...))))
	return h, "", nil
}

// checkEd25519Key refuses a public key no honest key pair has: one that
// is not a point of the curve, or a point of small order (the identity,
// the all-zero encoding a placeholder leaves, and the others of order 2,
// 4 or 8). Under a small-order key, a signature whose R is a small-order
// point and whose S is 0 verifies for any message with a probability of
// 1 in 8 or better: a few tries forge any event.
func checkEd25519Key(b []byte) error {
	p, err := new(edwards25519.Point).SetBytes(b)
	if err != nil {
		return errors.New("not an Ed25519 public key (not a point of the curve)")
	}
	if new(edwards25519.Point).MultByCofactor(p).Equal(edwards25519.NewIdentityPoint()) == 1 {
		return errors.New("a weak Ed25519 public key (a point of small order, such as the all-zero placeholder): any signature could verify under it; copy the application's public key from the developer portal")
	}
	return nil
}
