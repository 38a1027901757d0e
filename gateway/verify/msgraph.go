package verify

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/webhookd/webhookd/internal/jsonlimit"
)

// msgraphField names the checked field in errors (no header carries it).
const msgraphField = "clientState"

// msgraphScheme verifies Microsoft Graph change notifications. Graph
// signs nothing: each notification in the body's value[] carries the
// clientState given when the subscription was created, which must equal
// a configured secret (constant-time). Its validation request, a POST
// with ?validationToken=…, is a handshake answered with the token as
// text/plain. Rich notifications' validationTokens (JWTs) are not
// checked.
type msgraphScheme struct {
	states []string
}

func (s *msgraphScheme) Verify(r Request, _ time.Time) error {
	if !jsonlimit.Valid(r.Body) {
		return malformed(msgraphField, `body is not JSON: want {"value":[…]}`)
	}
	value := gjson.GetBytes(r.Body, "value")
	if !value.IsArray() || len(value.Array()) == 0 {
		return malformed(msgraphField, `want {"value":[…]} with at least one notification`)
	}
	var err error
	value.ForEach(func(i, n gjson.Result) bool {
		cs := n.Get(msgraphField)
		switch {
		case !cs.Exists() || cs.Type == gjson.String && cs.Str == "":
			err = fmt.Errorf("value[%d].%w", i.Int(), missing(msgraphField))
		case cs.Type != gjson.String:
			err = fmt.Errorf("value[%d].%w", i.Int(), malformed(msgraphField, "want a string"))
		case !equalToken(cs.Str, s.states):
			err = fmt.Errorf("value[%d].%s: not a configured secret: %w", i.Int(), msgraphField, ErrSignatureMismatch)
		}
		return err == nil
	})
	return err
}

// handshake answers Graph's validation request, POST
// ?validationToken=<token> (for change and lifecycle notifications
// alike), with the decoded token as text/plain, as Graph requires within
// 10 seconds.
func (s *msgraphScheme) handshake(r Request, _ time.Time) (Answer, bool, error) {
	if r.Method != http.MethodPost || r.RawQuery == "" {
		return Answer{}, false, nil
	}
	q, err := url.ParseQuery(r.RawQuery)
	if err != nil || !q.Has("validationToken") {
		return Answer{}, false, nil
	}
	token := q.Get("validationToken")
	if token == "" {
		return Answer{}, false, refused("validationToken", "empty")
	}
	return Answer{Status: http.StatusOK, ContentType: contentTypeText, Body: []byte(token)}, true, nil
}

// storedBody masks every notification's clientState (each key a JSON
// decoder could take for it, repeated or otherwise spelled ones too) with
// its length: it is the subscription's only credential, and whoever read
// it from a stored or forwarded payload could send accepted
// notifications. The rest of the body is kept byte for byte.
func (s *msgraphScheme) storedBody(body []byte) []byte {
	type span struct{ start, end, n int }
	var spans []span
	gjson.GetBytes(body, "value").ForEach(func(_, n gjson.Result) bool {
		n.ForEach(func(k, v gjson.Result) bool {
			if strings.EqualFold(k.String(), msgraphField) && v.Index > 0 {
				spans = append(spans, span{v.Index, v.Index + len(v.Raw), len(v.String())})
			}
			return true
		})
		return true
	})
	if len(spans) == 0 {
		return body
	}
	out := make([]byte, 0, len(body))
	at := 0
	for _, sp := range spans {
		out = append(out, body[at:sp.start]...)
		out = strconv.AppendQuote(out, "[masked: "+strconv.Itoa(sp.n)+" bytes]")
		at = sp.end
	}
	return append(out, body[at:]...)
}

// writeSigned: the clientState signs nothing.
func (s *msgraphScheme) writeSigned(io.Writer, Request) bool { return false }

// sign adds nothing: the clientState is in the body, which must carry
// the first secret in every notification.
func (s *msgraphScheme) sign(body []byte, now time.Time, _ string) (http.Header, string, error) {
	if err := (&msgraphScheme{states: s.states[:1]}).Verify(Request{Body: body}, now); err != nil {
		return nil, "", fmt.Errorf(`msgraph signs nothing: the body must be {"value":[…]} with the first secret as every clientState: %w`, err)
	}
	return http.Header{}, "", nil
}
