package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

const netlifyHeader = "X-Webhook-Signature"

// netlifyScheme verifies Netlify's deploy notifications: X-Webhook-Signature
// is a JWS (compact, HS256, keyed with the notification's JWS secret)
// whose claims are {"iss":"netlify","sha256":"<hex SHA-256 of the body>"}.
// Only HS256 is accepted (never "none", never a key named by the token).
type netlifyScheme struct {
	keys [][]byte
}

func newNetlify(secrets []string) scheme {
	keys := make([][]byte, len(secrets))
	for i, s := range secrets {
		keys[i] = []byte(s)
	}
	return &netlifyScheme{keys: keys}
}

// jwsClaims are the claims Netlify signs.
type jwsClaims struct {
	Iss    string `json:"iss"`
	SHA256 string `json:"sha256"`
}

// maxJWSLength bounds the token read: Netlify's are about 200 bytes.
const maxJWSLength = 4096

// parseJWS splits a compact HS256 JWS into its signing input, claims and
// signature, checking its header. Errors wrap ErrMalformedSignature.
func parseJWS(header, token string) (input string, claims jwsClaims, sig []byte, err error) {
	if len(token) > maxJWSLength {
		return "", claims, nil, malformed(header, "token too long")
	}
	h, rest, ok1 := strings.Cut(token, ".")
	p, s, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || strings.Contains(s, ".") {
		return "", claims, nil, malformed(header, "want a compact JWS (three parts)")
	}
	hb, errH := base64.RawURLEncoding.DecodeString(h)
	pb, errP := base64.RawURLEncoding.DecodeString(p)
	sig, errS := base64.RawURLEncoding.DecodeString(s)
	if errH != nil || errP != nil || errS != nil {
		return "", claims, nil, malformed(header, "want base64url parts")
	}
	var jh struct {
		Alg  string   `json:"alg"`
		Crit []string `json:"crit"`
	}
	if json.Unmarshal(hb, &jh) != nil || jh.Alg != "HS256" || len(jh.Crit) > 0 {
		return "", claims, nil, malformed(header, "want alg HS256")
	}
	if json.Unmarshal(pb, &claims) != nil {
		return "", claims, nil, malformed(header, "claims are not a JSON object")
	}
	if len(sig) != sha256.Size {
		return "", claims, nil, malformed(header, "want an HS256 signature of 32 bytes")
	}
	return h + "." + p, claims, sig, nil
}

func (s *netlifyScheme) Verify(r Request, _ time.Time) error {
	v := r.Header.Get(netlifyHeader)
	if v == "" {
		return missing(netlifyHeader)
	}
	input, claims, sig, err := parseJWS(netlifyHeader, v)
	if err != nil {
		return err
	}
	signed := false
	for _, k := range s.keys {
		m := hmac.New(sha256.New, k)
		m.Write([]byte(input))
		signed = signed || hmac.Equal(m.Sum(nil), sig)
	}
	if !signed {
		return mismatch(netlifyHeader)
	}
	sum := sha256.Sum256(r.Body)
	want := hex.EncodeToString(sum[:])
	if claims.Iss != "netlify" || !hmac.Equal([]byte(strings.ToLower(claims.SHA256)), []byte(want)) {
		// A token of ours over another body, or not Netlify's.
		return fmt.Errorf("%s: the signed sha256 is not the body's: %w", netlifyHeader, ErrSignatureMismatch)
	}
	return nil
}

// writeSigned writes the body, which the token's sha256 claim covers.
func (s *netlifyScheme) writeSigned(w io.Writer, r Request) bool {
	_, _ = w.Write(r.Body)
	return true
}

func (s *netlifyScheme) sign(body []byte, _ time.Time, _ string) (http.Header, string, error) {
	h := http.Header{}
	h.Set(netlifyHeader, signJWS(s.keys[0], body))
	return h, "", nil
}

// signJWS is the token Netlify sends for body.
func signJWS(key, body []byte) string {
	sum := sha256.Sum256(body)
	claims, _ := json.Marshal(jwsClaims{Iss: "netlify", SHA256: hex.EncodeToString(sum[:])})
	input := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + base64.RawURLEncoding.EncodeToString(claims)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(input))
	return input + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
