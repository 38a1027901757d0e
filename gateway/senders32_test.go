package gateway_test

import (
	"bytes"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/internal/testkit/sendertest"
)

// TestSenders32 puts each sender of issue 32 through the real gateway
// with TestEveryScheme's checks: its delivery, signed by a signer written
// from the provider's docs or SDK (sendertest), is accepted under the
// current and the rotated secret and delivered once under the id its
// defaults take; every forgery, stale or future timestamp, missing or
// malformed header is a 401 naming the check and records nothing.
func TestSenders32(t *testing.T) {
	t.Parallel()
	dest := newDestination(t)
	var all []scheme
	for _, s := range sendertest.Senders() {
		cfg := s.Config
		if cfg.PublicURL != "" {
			cfg.PublicURL = pipelinetest.PublicURLHere
		}
		var malformed []headerValue
		for _, m := range s.Malformed {
			malformed = append(malformed, headerValue{m[0], m[1]})
		}
		sign := s.Sign
		all = append(all, scheme{
			source: s.Name, cfg: cfg, body: s.Body, expectID: s.ExpectID, wrongSecret: s.WrongSecret,
			required: s.Required, timestamped: s.Timestamped, tokenOnly: s.TokenOnly, malformed: malformed,
			sign: func(t *testing.T, cfg verify.Config, body []byte, at time.Time, id string) (http.Header, string) {
				return sign(t, cfg, body, at, id), ""
			},
		})
	}
	p := startSchemes(t, dest, all)
	checkSchemes(t, p, dest, all)
}

// TestSNSThroughGateway: an SNS notification is recorded under its
// MessageId (a retry is a duplicate); a forged or foreign one is a 401
// and a certificate that cannot be had a 503, recording nothing; a
// SubscriptionConfirmation is confirmed and recorded nowhere.
func TestSNSThroughGateway(t *testing.T) {
	t.Parallel()
	sns := sendertest.NewSNS(t)
	dest := newDestination(t)
	p := pipelinetest.Start(t, pipelinetest.Options{Sources: []pipelinetest.SourceSpec{{
		Name: "sns", Verify: verify.Config{Scheme: verify.SchemeSNS, Secrets: []string{sns.Topic}, SNS: sns.Trust},
		Destinations: map[string]string{"app": dest.URL},
	}}})
	count := func() int { return p.Schema.Int(t, `SELECT count(*) FROM events WHERE source = 'sns'`) }
	post := func(m sendertest.Message, body []byte) (int, []byte) {
		if body == nil {
			body = sns.Body(t, m)
		}
		return p.Post(t, "/webhooks/sns", sendertest.Header(m), body)
	}

	n := sns.Notification("da41e39f-ea4d-435a-b922-c6aae3915ebe")
	body := sns.Body(t, n)
	if code, answer := post(n, body); code != http.StatusAccepted || !strings.Contains(string(answer), n.MessageID) {
		t.Fatalf("notification: %d %s, want 202 with its MessageId", code, answer)
	}
	if code, answer := post(n, body); code != http.StatusOK || !strings.Contains(string(answer), `"duplicate"`) {
		t.Fatalf("retry: %d %s, want 200 duplicate", code, answer)
	}
	before := count()
	forged := sns.Notification("forged-1")
	forged.OtherKey = true
	foreign := sns.Notification("foreign-1")
	foreign.TopicArn = "arn:aws:sns:us-east-1:999999999999:theirs"
	offHost := sns.Notification("offhost-1")
	offHost.SigningCertURL = "https://attacker.example/cert.pem"
	for name, m := range map[string]sendertest.Message{"forged": forged, "foreign topic": foreign, "certificate off host": offHost} {
		if code, answer := post(m, nil); code != http.StatusUnauthorized {
			t.Errorf("%s: %d %s, want 401", name, code, answer)
		}
	}
	gone := sns.Notification("gone-1")
	gone.SigningCertURL = sns.Server.URL + "/missing.pem"
	if code, answer := post(gone, nil); code != http.StatusServiceUnavailable {
		t.Errorf("certificate not served: %d %s, want 503 (SNS retries)", code, answer)
	}
	c := sns.Confirmation("tok-gw")
	if code, answer := post(c, nil); code != http.StatusOK {
		t.Errorf("confirmation: %d %s, want 200", code, answer)
	}
	if got := sns.Confirmed(); len(got) != 1 || got[0] != "tok-gw" {
		t.Errorf("confirmed %v, want [tok-gw]", got)
	}
	if after := count(); after != before {
		t.Errorf("refused deliveries or the confirmation were recorded: %d -> %d rows", before, after)
	}
	pipelinetest.Eventually(t, 15*time.Second, "delivery", func() bool { return dest.sink.Count("sns:app:"+n.MessageID) == 1 })
}

// TestAsanaHandshakeSecret: Asana's handshake is answered with its
// X-Hook-Secret echoed, which is stored and then verifies events; a
// second handshake with another secret is refused (403) and changes
// nothing; handshakes record no event.
func TestAsanaHandshakeSecret(t *testing.T) {
	t.Parallel()
	dest := newDestination(t)
	p := pipelinetest.Start(t, pipelinetest.Options{Sources: []pipelinetest.SourceSpec{{
		Name: "asana", Verify: verify.Config{Scheme: verify.SchemeAsana}, Destinations: map[string]string{"app": dest.URL},
	}}})
	const secret = "b537207f20cbfa02357cf448134da559"
	body := []byte(`{"events":[{"action":"added","resource":{"gid":"1203","resource_type":"task"},"created_at":"2024-01-01T00:00:00.000Z"}]}`)
	signed := func(key string) http.Header {
		h := http.Header{}
		h.Set("X-Hook-Signature", hexHMAC(key, body))
		return h
	}
	if code, _ := p.Post(t, "/webhooks/asana", signed(secret), body); code != http.StatusUnauthorized {
		t.Fatalf("event before the handshake: %d, want 401", code)
	}
	code, answer, header := postWithHeader(t, p.URL+"/webhooks/asana", http.Header{"X-Hook-Secret": {secret}}, nil)
	if code != http.StatusOK || header.Get("X-Hook-Secret") != secret {
		t.Fatalf("handshake: %d %s %v, want 200 echoing X-Hook-Secret", code, answer, header)
	}
	if got := p.Schema.Int(t, `SELECT count(*) FROM handshake_secrets WHERE source = 'asana' AND secret = $1`, secret); got != 1 {
		t.Fatalf("stored secrets: %d, want 1", got)
	}
	code, answer, header = postWithHeader(t, p.URL+"/webhooks/asana", http.Header{"X-Hook-Secret": {"an-attackers-secret"}}, nil)
	if code != http.StatusForbidden || header.Get("X-Hook-Secret") != "" {
		t.Errorf("second handshake: %d %s, want 403 without echo", code, answer)
	}
	if code, answer := p.Post(t, "/webhooks/asana", signed("an-attackers-secret"), body); code != http.StatusUnauthorized {
		t.Errorf("event under the refused secret: %d %s, want 401", code, answer)
	}
	if n := p.Schema.Int(t, `SELECT count(*) FROM events`); n != 0 {
		t.Fatalf("%d events recorded by handshakes and refusals", n)
	}
	if code, answer := p.Post(t, "/webhooks/asana", signed(secret), body); code != http.StatusAccepted {
		t.Fatalf("event under the learned secret: %d %s, want 202", code, answer)
	}
}

// TestRespondAndSourceBodyLimit: adyen answers "[accepted]" by default,
// a source's respond overrides webhookd's answer, and a source's
// max_body_bytes caps only its own bodies.
func TestRespondAndSourceBodyLimit(t *testing.T) {
	t.Parallel()
	dest := newDestination(t)
	const adyenKey = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
	p := pipelinetest.Start(t, pipelinetest.Options{Sources: []pipelinetest.SourceSpec{
		{Name: "adyen", Verify: verify.Config{Scheme: verify.SchemeAdyen, Secrets: []string{adyenKey}}, Destinations: map[string]string{"app": dest.URL}},
		{Name: "small", Verify: verify.Config{Scheme: verify.SchemeNone, AllowUnsigned: true}, EventID: "json:id", MaxBodyBytes: 100,
			Respond: &verify.Response{Status: http.StatusOK, Body: "OK"}, Destinations: map[string]string{"app": dest.URL}},
		{Name: "big", Verify: verify.Config{Scheme: verify.SchemeNone, AllowUnsigned: true}, EventID: "json:id", Destinations: map[string]string{"app": dest.URL}},
	}})
	batch := []byte(`{"live":"false","notificationItems":[` + adyenItem(t, adyenKey, "PSP9", "AUTHORISATION", 1000) + `]}`)
	for i := range 2 { // first delivery, then Adyen's retry
		code, answer, header := postWithHeader(t, p.URL+"/webhooks/adyen", nil, batch)
		if code != http.StatusOK || string(answer) != "[accepted]" || !strings.HasPrefix(header.Get("Content-Type"), "text/plain") {
			t.Errorf("adyen delivery %d: %d %q %q, want 200 [accepted] text/plain", i+1, code, answer, header.Get("Content-Type"))
		}
	}
	if code, answer, _ := postWithHeader(t, p.URL+"/webhooks/small", nil, []byte(`{"id":"evt_small"}`)); code != http.StatusOK || string(answer) != "OK" {
		t.Errorf("respond: %d %q, want 200 OK", code, answer)
	}
	large := []byte(`{"id":"evt_large","pad":"` + strings.Repeat("x", 200) + `"}`)
	if code, _, _ := postWithHeader(t, p.URL+"/webhooks/small", nil, large); code != http.StatusRequestEntityTooLarge {
		t.Errorf("small source, 220 bytes: %d, want 413", code)
	}
	if code, _, _ := postWithHeader(t, p.URL+"/webhooks/big", nil, large); code != http.StatusAccepted {
		t.Errorf("other source, 220 bytes: %d, want 202", code)
	}
	if n := p.Schema.Int(t, `SELECT count(*) FROM events WHERE external_id = 'evt_large'`); n != 1 {
		t.Errorf("evt_large recorded %d times, want once (by big only)", n)
	}
}

// postWithHeader posts body with header and returns the answer's status,
// body and headers.
func postWithHeader(t *testing.T, u string, h http.Header, body []byte) (int, []byte, http.Header) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, u, bytes.NewReader(body))
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.Bytes(), resp.Header
}

func hexHMAC(key string, body []byte) string {
	return hex.EncodeToString(hmacSHA256(key, body))
}
