package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/tidwall/gjson"

	"github.com/webhookd/webhookd/internal/jsonlimit"
)

// mailgunField names the checked object in errors: Mailgun signs inside
// the body, no header carries the signature.
const mailgunField = "signature"

// mailgunScheme verifies Mailgun's JSON webhooks: the body's signature
// object holds timestamp (unix seconds), token and signature, the hex
// HMAC-SHA256 of timestamp + token with the account's webhook signing
// key. The timestamp must be within the tolerance. Nothing else is
// signed: event-data, its id included, is whatever the request says, so
// a captured signature object verifies under any event-data while the
// timestamp is fresh. The source's content guard (Defaults.ContentGuard,
// on by default) answers a second body with a recorded signature object
// as a duplicate of the first: that is Mailgun's advice to remember used
// tokens. The event id alone would not do it: a forged event-data
// carries a fresh id.
type mailgunScheme struct {
	macs []*mac
	tol  int64
}

// mailgunSignature reads the signature object's three strings.
func mailgunSignature(body []byte) (ts, token, sig string, err error) {
	if !jsonlimit.Valid(body) {
		return "", "", "", malformed(mailgunField, `body is not JSON: want {"signature":{…},"event-data":{…}}`)
	}
	f := gjson.GetManyBytes(body, "signature.timestamp", "signature.token", "signature.signature")
	for i, name := range []string{"signature.timestamp", "signature.token", "signature.signature"} {
		if !f[i].Exists() || f[i].Type == gjson.String && f[i].Str == "" {
			return "", "", "", missing(name)
		}
		if f[i].Type != gjson.String {
			return "", "", "", malformed(name, "want a string")
		}
	}
	return f[0].Str, f[1].Str, f[2].Str, nil
}

func (s *mailgunScheme) Verify(r Request, now time.Time) error {
	ts, token, sig, err := mailgunSignature(r.Body)
	if err != nil {
		return err
	}
	var got [sha256.Size]byte
	if !decodeHex(got[:], sig) {
		return malformed("signature.signature", "want 64 hex digits")
	}
	if err := checkTimestamp("signature.timestamp", ts, now, s.tol); err != nil {
		return err
	}
	if firstSigner(s.macs, nil, func(sum []byte) bool { return hmac.Equal(sum, got[:]) }, ts, token) < 0 {
		return mismatch("signature.signature")
	}
	return nil
}

// writeSigned writes timestamp + token: Mailgun signs no more of the
// body (its event-data is unsigned).
func (s *mailgunScheme) writeSigned(w io.Writer, r Request) bool {
	ts, token, _, err := mailgunSignature(r.Body)
	if err != nil {
		return false
	}
	_, _ = io.WriteString(w, ts+token)
	return true
}

// sign adds nothing: Mailgun signs inside the body, which must already
// carry a signature object valid under the first secret
// (MailgunSignBody makes one).
func (s *mailgunScheme) sign(body []byte, now time.Time, _ string) (http.Header, string, error) {
	if err := (&mailgunScheme{macs: s.macs[:1], tol: s.tol}).Verify(Request{Body: body}, now); err != nil {
		return nil, "", fmt.Errorf("mailgun signs inside the body (verify.MailgunSignBody): %w", err)
	}
	return http.Header{}, "", nil
}

// MailgunSignBody returns the JSON object body with its signature object
// set as Mailgun would send it at time now with token, signed with
// secret: for webhookd send and tests. Its keys come out sorted.
func MailgunSignBody(body []byte, secret, token string, now time.Time) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, fmt.Errorf("mailgun body: want a JSON object: %w", err)
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + token))
	sig, _ := json.Marshal(map[string]string{"timestamp": ts, "token": token, "signature": hex.EncodeToString(m.Sum(nil))})
	obj["signature"] = sig
	return json.Marshal(obj)
}
