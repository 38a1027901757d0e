package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/webhookd/webhookd/internal/jsonlimit"
)

const (
	slackHeader          = "X-Slack-Signature"
	slackTimestampHeader = "X-Slack-Request-Timestamp"
	slackSigPrefix       = "v0="
)

// v0Signature is Slack's signature format, which Zoom uses too under its
// own header names: <header>: v0=<hex HMAC-SHA256 of
// "v0:<timestamp header>:<body>">, the timestamp in unix seconds.
type v0Signature struct {
	macs     []*mac
	tol      int64
	header   string // canonical
	tsHeader string // canonical
}

// slackScheme verifies X-Slack-Signature: v0=<hex> of
// "v0:<X-Slack-Request-Timestamp>:<body>".
type slackScheme struct {
	v0Signature
}

func newSlack(keys [][]byte, tol int64) *slackScheme {
	return &slackScheme{v0Signature{macs: newMACs(keys, sha256New), tol: tol, header: slackHeader, tsHeader: slackTimestampHeader}}
}

// parseV0Header decodes a v0=<hex> value of header into dst.
func parseV0Header(dst *[sha256.Size]byte, header, v string) error {
	hexSig, ok := strings.CutPrefix(v, slackSigPrefix)
	if !ok {
		return malformed(header, `want "v0=" prefix`)
	}
	if !decodeHex(dst[:], hexSig) {
		return malformed(header, "want 64 hex digits")
	}
	return nil
}

func (s *v0Signature) Verify(r Request, now time.Time) error {
	_, err := s.match(r, now)
	return err
}

// match verifies r and returns the index of the secret that signed it.
func (s *v0Signature) match(r Request, now time.Time) (int, error) {
	v, ts, err := timestampedHeaders(r, s.header, s.tsHeader)
	if err != nil {
		return 0, err
	}
	var got [sha256.Size]byte
	if err := parseV0Header(&got, s.header, v); err != nil {
		return 0, err
	}
	if err := checkTimestamp(s.tsHeader, ts, now, s.tol); err != nil {
		return 0, err
	}
	i := firstSigner(s.macs, r.Body, func(sum []byte) bool { return hmac.Equal(sum, got[:]) }, "v0:", ts, ":")
	if i < 0 {
		return 0, mismatch(s.header)
	}
	return i, nil
}

// writeSigned writes "v0:<timestamp>:<body>".
func (s *v0Signature) writeSigned(w io.Writer, r Request) bool {
	_, _ = io.WriteString(w, "v0:"+r.Header.Get(s.tsHeader)+":")
	_, _ = w.Write(r.Body)
	return true
}

func (s *v0Signature) sign(body []byte, now time.Time, _ string) (http.Header, string, error) {
	st := s.macs[0].get()
	defer s.macs[0].put(st)
	ts := strconv.FormatInt(now.Unix(), 10)
	st.writeString("v0:" + ts + ":")
	st.h.Write(body)
	h := http.Header{}
	h.Set(s.tsHeader, ts)
	h.Set(s.header, slackSigPrefix+hex.EncodeToString(st.finish()))
	return h, "", nil
}

// handshake answers Slack's url_verification request
// ({"type":"url_verification","challenge":…}) with {"challenge":…} once
// its signature verified (Slack signs these requests too). Every other
// body, including invalid JSON, is no handshake.
func (s *slackScheme) handshake(r Request, now time.Time) (Answer, bool, error) {
	challenge, ok := slackChallenge(r.Body)
	if !ok {
		return Answer{}, false, nil
	}
	if err := s.Verify(r, now); err != nil {
		return Answer{}, false, err
	}
	b, _ := json.Marshal(map[string]string{"challenge": challenge})
	return Answer{Status: http.StatusOK, ContentType: contentTypeJSON, Body: b}, true, nil
}

// slackChallenge reports the challenge of a url_verification body.
func slackChallenge(body []byte) (challenge string, ok bool) {
	if !jsonlimit.Valid(body) {
		return "", false
	}
	r := gjson.GetManyBytes(body, "type", "challenge")
	if r[0].Type != gjson.String || r[0].Str != "url_verification" || r[1].Type != gjson.String || r[1].Str == "" {
		return "", false
	}
	return r[1].Str, true
}
