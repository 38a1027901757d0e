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
)

const (
	slackHeader          = "X-Slack-Signature"
	slackTimestampHeader = "X-Slack-Request-Timestamp"
	slackSigPrefix       = "v0="
)

// slackScheme verifies X-Slack-Signature: v0=<hex> of
// "v0:<X-Slack-Request-Timestamp>:<body>".
type slackScheme struct {
	macs []*mac
	tol  int64
}

// parseSlackHeader decodes an X-Slack-Signature value into dst.
func parseSlackHeader(dst *[sha256.Size]byte, v string) error {
	hexSig, ok := strings.CutPrefix(v, slackSigPrefix)
	if !ok {
		return malformed(slackHeader, `want "v0=" prefix`)
	}
	if !decodeHex(dst[:], hexSig) {
		return malformed(slackHeader, "want 64 hex digits")
	}
	return nil
}

func (s *slackScheme) Verify(r Request, now time.Time) error {
	v := r.Header.Get(slackHeader)
	if v == "" {
		return missing(slackHeader)
	}
	ts := r.Header.Get(slackTimestampHeader)
	if ts == "" {
		return missing(slackTimestampHeader)
	}
	var got [sha256.Size]byte
	if err := parseSlackHeader(&got, v); err != nil {
		return err
	}
	if err := checkTimestamp(slackTimestampHeader, ts, now, s.tol); err != nil {
		return err
	}
	for _, m := range s.macs {
		st := m.get()
		st.buf = append(append(append(st.buf[:0], "v0:"...), ts...), ':')
		st.h.Write(st.buf)
		st.h.Write(r.Body)
		ok := hmac.Equal(st.finish(), got[:])
		m.put(st)
		if ok {
			return nil
		}
	}
	return mismatch(slackHeader)
}

// writeSigned writes "v0:<timestamp>:<body>".
func (s *slackScheme) writeSigned(w io.Writer, r Request) bool {
	_, _ = io.WriteString(w, "v0:"+r.Header.Get(slackTimestampHeader)+":")
	_, _ = w.Write(r.Body)
	return true
}

func (s *slackScheme) sign(body []byte, now time.Time, _ string) (http.Header, string, error) {
	st := s.macs[0].get()
	defer s.macs[0].put(st)
	ts := strconv.FormatInt(now.Unix(), 10)
	st.writeString("v0:" + ts + ":")
	st.h.Write(body)
	h := http.Header{}
	h.Set(slackTimestampHeader, ts)
	h.Set(slackHeader, slackSigPrefix+hex.EncodeToString(st.finish()))
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
	if !gjson.ValidBytes(body) {
		return "", false
	}
	r := gjson.GetManyBytes(body, "type", "challenge")
	if r[0].Type != gjson.String || r[0].Str != "url_verification" || r[1].Type != gjson.String || r[1].Str == "" {
		return "", false
	}
	return r[1].Str, true
}
