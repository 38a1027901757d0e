package gateway_test

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
)

// handshakeCase is one request to a source's URL and the answer expected;
// every handshake, answered or refused, records nothing.
type handshakeCase struct {
	name         string
	source       string
	method       string
	query        string
	header       http.Header
	body         []byte
	expectCode   int
	expectType   string // Content-Type prefix of a 2xx answer
	expectBody   string // exact answer body of a 2xx answer
	expectNoEcho string // a value the answer must not contain (refusals)
}

// TestHandshakes answers every sender's handshake through the real
// gateway: the provider's expected answer for the right token or
// signature, 401/403 otherwise, and never a row in events.
func TestHandshakes(t *testing.T) {
	t.Parallel()
	dest := newDestination(t)
	sources := []verify.Config{
		{Scheme: verify.SchemeMeta, Secrets: []string{"meta-app-secret"}, VerifyToken: "meta-verify-token"},
		{Scheme: verify.SchemeZoom, Secrets: []string{"zoom-old-token", "zoom-secret-token"}},
		{Scheme: verify.SchemeSlack, Secrets: []string{"slack-signing-secret"}},
		{Scheme: verify.SchemeDiscord, Secrets: []string{publicHex("discord-old"), publicHex("discord-app")}},
		{Scheme: verify.SchemeMSGraph, Secrets: []string{"graph-client-state", "graph-rotated-state"}},
	}
	specs := make([]pipelinetest.SourceSpec, len(sources))
	for i, cfg := range sources {
		specs[i] = pipelinetest.SourceSpec{Name: cfg.Scheme, Verify: cfg, Destinations: map[string]string{"app": dest.URL}}
	}
	p := pipelinetest.Start(t, pipelinetest.Options{Sources: specs})

	metaQuery := func(mode, token, challenge string) string {
		return url.Values{"hub.mode": {mode}, "hub.verify_token": {token}, "hub.challenge": {challenge}}.Encode()
	}
	cases := []handshakeCase{
		{name: "meta subscribe", source: "meta", method: http.MethodGet, query: metaQuery("subscribe", "meta-verify-token", "1158201444"),
			expectCode: http.StatusOK, expectType: "text/plain", expectBody: "1158201444"},
		{name: "meta wrong verify token", source: "meta", method: http.MethodGet, query: metaQuery("subscribe", "meta-wrong-token", "1158201444"),
			expectCode: http.StatusForbidden, expectNoEcho: "1158201444"},
		{name: "meta no verify token", source: "meta", method: http.MethodGet, query: "hub.mode=subscribe&hub.challenge=1158201444",
			expectCode: http.StatusForbidden, expectNoEcho: "1158201444"},
		{name: "meta unsubscribe mode", source: "meta", method: http.MethodGet, query: metaQuery("unsubscribe", "meta-verify-token", "1158201444"),
			expectCode: http.StatusForbidden, expectNoEcho: "1158201444"},
		{name: "meta GET without handshake", source: "meta", method: http.MethodGet, expectCode: http.StatusMethodNotAllowed},
		{name: "meta subscribe as POST is an unsigned event", source: "meta", method: http.MethodPost, query: metaQuery("subscribe", "meta-verify-token", "1158201444"),
			body: []byte(`{}`), expectCode: http.StatusUnauthorized, expectNoEcho: "1158201444"},
	}
	// Zoom: answered under the secret that signed the request (the
	// rotated one here), computed as zoom/webhook-sample does.
	zoomValidation := []byte(`{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}`)
	zoomSigned, _ := signZoom(t, verify.Config{Secrets: []string{"zoom-secret-token"}}, zoomValidation, time.Now(), "")
	zoomWrong, _ := signZoom(t, verify.Config{Secrets: []string{"zoom-wrong-token"}}, zoomValidation, time.Now(), "")
	zoomStale, _ := signZoom(t, verify.Config{Secrets: []string{"zoom-secret-token"}}, zoomValidation, time.Now().Add(-time.Hour), "")
	zoomAnswer := `{"plainToken":"qgg8vlvZRS6UYooatFL8Aw","encryptedToken":"` + hex.EncodeToString(hmacSHA256("zoom-secret-token", []byte("qgg8vlvZRS6UYooatFL8Aw"))) + `"}`
	slackChallenge := []byte(`{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)
	slackSigned, _, err := verify.Sign(verify.Config{Scheme: verify.SchemeSlack, Secrets: []string{"slack-signing-secret"}}, slackChallenge, time.Now(), "")
	if err != nil {
		t.Fatal(err)
	}
	discordKey := verify.Config{Secrets: []string{publicHex("discord-app")}}
	discordPing := []byte(`{"application_id":"1234","id":"9876","token":"tok","type":1,"user":{"id":"53908232506183680"},"version":1}`)
	discordPingSigned, _ := signDiscord(t, discordKey, discordPing, time.Now(), "")
	discordPingWrong, _ := signDiscord(t, verify.Config{Secrets: []string{publicHex("discord-other")}}, discordPing, time.Now(), "")
	discordEventPing := []byte(`{"version":1,"application_id":"1234","type":0}`)
	discordEventPingSigned, _ := signDiscord(t, discordKey, discordEventPing, time.Now(), "")
	cases = append(cases,
		handshakeCase{name: "msgraph validationToken", source: "msgraph", method: http.MethodPost,
			query:  "validationToken=" + url.QueryEscape("Validation: Testing client application reachability for subscription Request-Id: 25a6d4c3-52b7-4c36-b0d1-9b2e1d3a7f10"),
			header: http.Header{"Content-Type": {"text/plain; charset=utf-8"}}, body: []byte{},
			expectCode: http.StatusOK, expectType: "text/plain", expectBody: "Validation: Testing client application reachability for subscription Request-Id: 25a6d4c3-52b7-4c36-b0d1-9b2e1d3a7f10"},
		handshakeCase{name: "msgraph empty validationToken", source: "msgraph", method: http.MethodPost, query: "validationToken=",
			body: []byte{}, expectCode: http.StatusForbidden},
		handshakeCase{name: "msgraph notification without clientState", source: "msgraph", method: http.MethodPost,
			body: []byte(`{"value":[{"subscriptionId":"s1","changeType":"created"}]}`), expectCode: http.StatusUnauthorized},
		handshakeCase{name: "discord interaction PING", source: "discord", method: http.MethodPost, header: discordPingSigned, body: discordPing,
			expectCode: http.StatusOK, expectType: "application/json", expectBody: `{"type":1}`},
		handshakeCase{name: "discord interaction PING wrong key", source: "discord", method: http.MethodPost, header: discordPingWrong, body: discordPing,
			expectCode: http.StatusUnauthorized, expectNoEcho: `"type":1`},
		handshakeCase{name: "discord webhook-event PING", source: "discord", method: http.MethodPost, header: discordEventPingSigned, body: discordEventPing,
			expectCode: http.StatusNoContent},
		handshakeCase{name: "discord webhook-event PING unsigned", source: "discord", method: http.MethodPost, header: http.Header{}, body: discordEventPing,
			expectCode: http.StatusUnauthorized},
		handshakeCase{name: "zoom url_validation", source: "zoom", method: http.MethodPost, header: zoomSigned, body: zoomValidation,
			expectCode: http.StatusOK, expectType: "application/json", expectBody: zoomAnswer},
		handshakeCase{name: "zoom url_validation wrong secret", source: "zoom", method: http.MethodPost, header: zoomWrong, body: zoomValidation,
			expectCode: http.StatusUnauthorized, expectNoEcho: "encryptedToken"},
		handshakeCase{name: "zoom url_validation stale", source: "zoom", method: http.MethodPost, header: zoomStale, body: zoomValidation,
			expectCode: http.StatusUnauthorized, expectNoEcho: "encryptedToken"},
		handshakeCase{name: "zoom url_validation unsigned", source: "zoom", method: http.MethodPost, header: http.Header{}, body: zoomValidation,
			expectCode: http.StatusUnauthorized, expectNoEcho: "encryptedToken"},
		handshakeCase{name: "slack url_verification", source: "slack", method: http.MethodPost, header: slackSigned, body: slackChallenge,
			expectCode: http.StatusOK, expectType: "application/json", expectBody: `{"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}`},
		handshakeCase{name: "slack url_verification unsigned", source: "slack", method: http.MethodPost, header: http.Header{}, body: slackChallenge,
			expectCode: http.StatusUnauthorized, expectNoEcho: "3eZbrw1aBm"},
	)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := p.Schema.Int(t, `SELECT count(*) FROM events`)
			target := p.URL + "/webhooks/" + tc.source
			if tc.query != "" {
				target += "?" + tc.query
			}
			req, err := http.NewRequest(tc.method, target, bytes.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.header {
				req.Header[k] = v
			}
			if tc.body != nil && req.Header.Get("Content-Type") == "" {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			answer, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.expectCode {
				t.Fatalf("got %d %s, want %d", resp.StatusCode, answer, tc.expectCode)
			}
			if tc.expectCode < 300 {
				if ct := resp.Header.Get("Content-Type"); tc.expectType != "" && !bytes.HasPrefix([]byte(ct), []byte(tc.expectType)) {
					t.Errorf("Content-Type %q, want %s", ct, tc.expectType)
				}
				if string(answer) != tc.expectBody {
					t.Errorf("answer %q, want %q", answer, tc.expectBody)
				}
			}
			if tc.expectNoEcho != "" && bytes.Contains(answer, []byte(tc.expectNoEcho)) {
				t.Errorf("refusal echoes %q: %s", tc.expectNoEcho, answer)
			}
			if after := p.Schema.Int(t, `SELECT count(*) FROM events`); after != before {
				t.Errorf("the handshake was recorded: %d -> %d rows", before, after)
			}
		})
	}
	time.Sleep(200 * time.Millisecond)
	if n := dest.sink.Stats().Calls; n != 0 {
		t.Errorf("destination got %d calls from handshakes", n)
	}
}

// TestMSGraphNotifications posts Graph change notifications through the
// real gateway: each notification's clientState must be a configured
// secret (either while rotating); a retry of the same batch records
// nothing new; a wrong or missing clientState anywhere in the batch is a
// 401 that records nothing.
func TestMSGraphNotifications(t *testing.T) {
	t.Parallel()
	dest := newDestination(t)
	cfg := verify.Config{Scheme: verify.SchemeMSGraph, Secrets: []string{"graph-client-state", "graph-rotated-state"}}
	p := pipelinetest.Start(t, pipelinetest.Options{Sources: []pipelinetest.SourceSpec{{Name: "graph", Verify: cfg, Destinations: map[string]string{"app": dest.URL}}}})
	notification := func(state, resource string) string {
		return `{"subscriptionId":"0a5b2f8c-1111-4d6e-9c4b-2a6e3f7d8c90","subscriptionExpirationDateTime":"2026-12-05T11:00:00Z","changeType":"created",` +
			`"resource":"Users/u1/Messages/` + resource + `","resourceData":{"@odata.type":"#Microsoft.Graph.Message","id":"` + resource + `"},` +
			`"clientState":"` + state + `","tenantId":"t1"}`
	}
	batch := func(items ...string) []byte { return []byte(`{"value":[` + strings.Join(items, ",") + `]}`) }
	count := func() int { return p.Schema.Int(t, `SELECT count(*) FROM events WHERE source = 'graph'`) }

	for i, body := range [][]byte{
		batch(notification("graph-client-state", "m1"), notification("graph-client-state", "m2")),
		batch(notification("graph-rotated-state", "m3")),
	} {
		code, answer := p.Post(t, "/webhooks/graph", nil, body)
		if code != http.StatusAccepted || !strings.Contains(string(answer), bodySHA256(body, "")) {
			t.Fatalf("batch %d: got %d %s, want 202 with the body's SHA-256 as event id", i, code, answer)
		}
	}
	code, answer := p.Post(t, "/webhooks/graph", nil, batch(notification("graph-client-state", "m1"), notification("graph-client-state", "m2")))
	if code != http.StatusOK || !strings.Contains(string(answer), `"duplicate"`) {
		t.Fatalf("retried batch: got %d %s, want 200 duplicate", code, answer)
	}
	before := count()
	for name, body := range map[string][]byte{
		"wrong clientState":           batch(notification("graph-wrong-state", "m4")),
		"one wrong clientState":       batch(notification("graph-client-state", "m5"), notification("graph-wrong-state", "m6")),
		"no clientState":              batch(`{"subscriptionId":"s","changeType":"created"}`),
		"no value":                    []byte(`{"foo":[]}`),
		"empty value":                 []byte(`{"value":[]}`),
		"clientState of another type": batch(`{"clientState":42}`),
		"not JSON":                    []byte(`value=1`),
	} {
		code, answer := p.Post(t, "/webhooks/graph", nil, body)
		if code != http.StatusUnauthorized || !strings.Contains(string(answer), "clientState") || strings.Contains(string(answer), "graph-client-state") {
			t.Errorf("%s: got %d %s, want 401 naming clientState, no secret", name, code, answer)
		}
	}
	if after := count(); after != before {
		t.Errorf("refused notifications were recorded: %d -> %d rows", before, after)
	}
	pipelinetest.Eventually(t, 15*time.Second, "two deliveries", func() bool { return dest.sink.Stats().Calls >= 2 })
}

// mailgunSigned is a Mailgun JSON webhook signed as Mailgun's docs
// describe (hex HMAC-SHA256 of timestamp + token), written independently
// of package verify.
func mailgunSigned(key, token, eventID string, at time.Time) []byte {
	ts := strconv.FormatInt(at.Unix(), 10)
	sig := hex.EncodeToString(hmacSHA256(key, []byte(ts+token)))
	return []byte(`{"signature":{"timestamp":"` + ts + `","token":"` + token + `","signature":"` + sig + `"},` +
		`"event-data":{"event":"delivered","id":"` + eventID + `","timestamp":1700000000.1,"recipient":"a@example.com"}}`)
}

// TestMailgunWebhooks posts Mailgun webhooks through the real gateway:
// the signature inside the body under either signing key (rotation), a
// retry of the same delivery answered as a duplicate, and every forgery,
// stale or future timestamp or missing field a 401 that records nothing.
func TestMailgunWebhooks(t *testing.T) {
	t.Parallel()
	dest := newDestination(t)
	cfg := verify.Config{Scheme: verify.SchemeMailgun, Secrets: []string{"mg-signing-key", "mg-rotated-key"}}
	p := pipelinetest.Start(t, pipelinetest.Options{Sources: []pipelinetest.SourceSpec{{Name: "mailgun", Verify: cfg, Destinations: map[string]string{"app": dest.URL}}}})
	count := func() int { return p.Schema.Int(t, `SELECT count(*) FROM events WHERE source = 'mailgun'`) }
	now := time.Now()

	first := mailgunSigned("mg-signing-key", "tok-1", "mg-evt-1", now)
	for i, body := range [][]byte{first, mailgunSigned("mg-rotated-key", "tok-2", "mg-evt-2", now)} {
		code, answer := p.Post(t, "/webhooks/mailgun", nil, body)
		if code != http.StatusAccepted || !strings.Contains(string(answer), fmt.Sprintf(`"event_id":"mg-evt-%d"`, i+1)) {
			t.Fatalf("delivery %d: got %d %s, want 202 with event-data.id", i+1, code, answer)
		}
	}
	// Mailgun's retry: the same event, signed again.
	code, answer := p.Post(t, "/webhooks/mailgun", nil, mailgunSigned("mg-signing-key", "tok-3", "mg-evt-1", now.Add(time.Second)))
	if code != http.StatusOK || !strings.Contains(string(answer), `"duplicate"`) {
		t.Fatalf("retry: got %d %s, want 200 duplicate", code, answer)
	}
	before := count()
	for name, tc := range map[string]struct {
		body        []byte
		expectCheck string
	}{
		"wrong key":        {mailgunSigned("mg-wrong-key", "tok-4", "mg-evt-4", now), "mismatch"},
		"altered token":    {bytes.Replace(mailgunSigned("mg-signing-key", "tok-5", "mg-evt-5", now), []byte("tok-5"), []byte("tok-6"), 1), "mismatch"},
		"stale":            {mailgunSigned("mg-signing-key", "tok-7", "mg-evt-7", now.Add(-10*time.Minute)), "outside tolerance"},
		"future":           {mailgunSigned("mg-signing-key", "tok-8", "mg-evt-8", now.Add(10*time.Minute)), "outside tolerance"},
		"no signature":     {[]byte(`{"event-data":{"id":"mg-evt-9"}}`), "missing"},
		"no token":         {[]byte(`{"signature":{"timestamp":"1","signature":"` + hex64 + `"},"event-data":{"id":"x"}}`), "missing"},
		"signature number": {[]byte(`{"signature":{"timestamp":"1","token":"t","signature":5},"event-data":{"id":"x"}}`), "malformed"},
		"short signature":  {[]byte(`{"signature":{"timestamp":"1","token":"t","signature":"abcd"},"event-data":{"id":"x"}}`), "malformed"},
		"form body":        {[]byte(`timestamp=1&token=t&signature=` + hex64), "malformed"},
	} {
		code, answer := p.Post(t, "/webhooks/mailgun", nil, tc.body)
		if code != http.StatusUnauthorized || !strings.Contains(string(answer), tc.expectCheck) || strings.Contains(string(answer), "mg-signing-key") {
			t.Errorf("%s: got %d %s, want 401 %s", name, code, answer, tc.expectCheck)
		}
	}
	if after := count(); after != before {
		t.Errorf("refused deliveries were recorded: %d -> %d rows", before, after)
	}
	pipelinetest.Eventually(t, 15*time.Second, "two deliveries", func() bool { return dest.sink.Stats().Calls >= 2 })

	// verify.MailgunSignBody (webhookd send's signer) makes what the
	// gateway accepts.
	body, err := verify.MailgunSignBody([]byte(`{"event-data":{"event":"opened","id":"mg-evt-10"}}`), "mg-rotated-key", "tok-10", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if code, answer := p.Post(t, "/webhooks/mailgun", nil, body); code != http.StatusAccepted {
		t.Fatalf("MailgunSignBody: got %d %s", code, answer)
	}
}
