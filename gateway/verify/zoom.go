package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"time"

	"github.com/tidwall/gjson"

	"github.com/webhookd/webhookd/internal/jsonlimit"
)

const (
	zoomHeader          = "X-Zm-Signature"         // canonical form of x-zm-signature
	zoomTimestampHeader = "X-Zm-Request-Timestamp" // canonical form of x-zm-request-timestamp
)

// zoomScheme verifies Zoom's webhooks: Slack's v0 format under
// x-zm-signature and x-zm-request-timestamp (unix seconds), keyed with the
// app's Webhook Secret Token. Its endpoint.url_validation request (signed
// too) is a handshake.
type zoomScheme struct {
	v0Signature
	keys [][]byte
}

func newZoom(keys [][]byte, tol int64) *zoomScheme {
	return &zoomScheme{
		v0Signature: v0Signature{macs: newMACs(keys, sha256New), tol: tol, header: zoomHeader, tsHeader: zoomTimestampHeader},
		keys:        keys,
	}
}

// zoomValidation is the answer to endpoint.url_validation.
type zoomValidation struct {
	PlainToken     string `json:"plainToken"`
	EncryptedToken string `json:"encryptedToken"`
}

// handshake answers {"event":"endpoint.url_validation","payload":
// {"plainToken":p}} once its signature verified, with p and the hex
// HMAC-SHA256 of p under the secret that signed the request (so a
// rotation answers with the token Zoom holds).
func (s *zoomScheme) handshake(r Request, now time.Time) (Answer, bool, error) {
	if r.Method != http.MethodPost || !jsonlimit.Valid(r.Body) {
		return Answer{}, false, nil
	}
	f := gjson.GetManyBytes(r.Body, "event", "payload.plainToken")
	if f[0].Type != gjson.String || f[0].Str != "endpoint.url_validation" {
		return Answer{}, false, nil
	}
	i, err := s.match(r, now)
	if err != nil {
		return Answer{}, false, err
	}
	if f[1].Type != gjson.String || f[1].Str == "" {
		return Answer{}, false, refused("payload.plainToken", "missing")
	}
	m := hmac.New(sha256.New, s.keys[i])
	m.Write([]byte(f[1].Str))
	b, _ := json.Marshal(zoomValidation{PlainToken: f[1].Str, EncryptedToken: hex.EncodeToString(m.Sum(nil))})
	return Answer{Status: http.StatusOK, ContentType: contentTypeJSON, Body: b}, true, nil
}
