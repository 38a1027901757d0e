package verify_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/webhookd/webhookd/gateway/verify"
)

// TestSenderHandshakes answers each new sender's handshake as its docs
// describe, and refuses what is not one.
func TestSenderHandshakes(t *testing.T) {
	t.Parallel()
	now := time.Now()
	mac := func(key, msg string) []byte {
		m := hmac.New(sha256.New, []byte(key))
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	newV := func(cfg verify.Config) verify.Verifier {
		v, err := verify.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	x := newV(verify.Config{Scheme: verify.SchemeX, Secrets: []string{"x-consumer-secret"}})
	twitch := newV(verify.Config{Scheme: verify.SchemeTwitch, Secrets: []string{"twitch-secret-0123"}})
	dropbox := newV(verify.Config{Scheme: verify.SchemeDropbox, Secrets: []string{"dbx-secret"}})
	xero := newV(verify.Config{Scheme: verify.SchemeXero, Secrets: []string{"xero-key"}})
	woo := newV(verify.Config{Scheme: verify.SchemeWooCommerce, Secrets: []string{"wc-secret"}})
	trello := newV(verify.Config{Scheme: verify.SchemeTrello, Secrets: []string{"tr-secret"}, PublicURL: "https://h/webhooks/trello"})
	mandrill := newV(verify.Config{Scheme: verify.SchemeMailchimp, Secrets: []string{"md-key"}, PublicURL: "https://h/webhooks/mailchimp"})
	asana := newV(verify.Config{Scheme: verify.SchemeAsana})

	twitchBody := []byte(`{"challenge":"pogchamp-kappa-360noscope-vohiyo","subscription":{"id":"f1c2a387","status":"webhook_callback_verification_pending","type":"channel.follow","version":"2"}}`)
	twitchHeader := func(secret string, at time.Time) http.Header {
		ts := at.UTC().Format(time.RFC3339Nano)
		h := http.Header{}
		h.Set("Twitch-Eventsub-Message-Id", "e76c6bd4-55c9-4987-8304-da1588d8988b")
		h.Set("Twitch-Eventsub-Message-Timestamp", ts)
		h.Set("Twitch-Eventsub-Message-Type", "webhook_callback_verification")
		h.Set("Twitch-Eventsub-Message-Signature", "sha256="+hex.EncodeToString(mac(secret, "e76c6bd4-55c9-4987-8304-da1588d8988b"+ts+string(twitchBody))))
		return h
	}
	xeroEmpty := []byte(`{"events":[],"firstEventSequence":0,"lastEventSequence":0,"entropy":"IRPPZGOTXMCVHGSLLZJD"}`)
	xeroHeader := func(secret string) http.Header {
		h := http.Header{}
		h.Set("x-xero-signature", base64.StdEncoding.EncodeToString(mac(secret, string(xeroEmpty))))
		return h
	}
	asanaHeader := http.Header{}
	asanaHeader.Set("X-Hook-Secret", "b537207f20cbfa02357cf448134da559")

	for _, tc := range []struct {
		name         string
		v            verify.Verifier
		r            verify.Request
		expectOK     bool
		expectErr    error
		expectBody   string
		expectStatus int
	}{
		{"x crc", x, verify.Request{Method: http.MethodGet, RawQuery: "crc_token=9b4507b3-9040-4669-9e5c-0e6e1e1c33a0"}, true, nil,
			`{"response_token":"sha256=` + base64.StdEncoding.EncodeToString(mac("x-consumer-secret", "9b4507b3-9040-4669-9e5c-0e6e1e1c33a0")) + `"}`, 200},
		{"x crc of a JSON body", x, verify.Request{Method: http.MethodGet, RawQuery: url.Values{"crc_token": {`{"a":1}`}}.Encode()}, false, verify.ErrHandshakeRefused, "", 0},
		{"x GET without crc", x, verify.Request{Method: http.MethodGet}, false, nil, "", 0},
		{"twitch challenge", twitch, verify.Request{Method: http.MethodPost, Header: twitchHeader("twitch-secret-0123", now), Body: twitchBody}, true, nil,
			"pogchamp-kappa-360noscope-vohiyo", 200},
		{"twitch challenge, wrong secret", twitch, verify.Request{Method: http.MethodPost, Header: twitchHeader("other", now), Body: twitchBody}, false, verify.ErrSignatureMismatch, "", 0},
		{"twitch challenge, stale", twitch, verify.Request{Method: http.MethodPost, Header: twitchHeader("twitch-secret-0123", now.Add(-11*time.Minute)), Body: twitchBody}, false, verify.ErrTimestampOutsideTolerance, "", 0},
		{"dropbox challenge", dropbox, verify.Request{Method: http.MethodGet, RawQuery: "challenge=abc123"}, true, nil, "abc123", 200},
		{"xero intent to receive", xero, verify.Request{Method: http.MethodPost, Header: xeroHeader("xero-key"), Body: xeroEmpty}, true, nil, "", 200},
		{"xero intent to receive, bad signature", xero, verify.Request{Method: http.MethodPost, Header: xeroHeader("other"), Body: xeroEmpty}, false, verify.ErrSignatureMismatch, "", 0},
		{"woocommerce ping", woo, verify.Request{Method: http.MethodPost, Body: []byte("webhook_id=42")}, true, nil, "", 200},
		{"woocommerce other form", woo, verify.Request{Method: http.MethodPost, Body: []byte("webhook_id=42&x=1")}, false, nil, "", 0},
		{"trello HEAD", trello, verify.Request{Method: http.MethodHead}, true, nil, "", 200},
		{"mandrill HEAD", mandrill, verify.Request{Method: http.MethodHead}, true, nil, "", 200},
		{"asana handshake", asana, verify.Request{Method: http.MethodPost, Header: asanaHeader}, true, nil, "", 200},
	} {
		a, ok, err := verify.Handshake(tc.v, tc.r, now)
		if ok != tc.expectOK || !errors.Is(err, tc.expectErr) || tc.expectErr == nil && err != nil {
			t.Errorf("%s: ok %v err %v, want %v %v", tc.name, ok, err, tc.expectOK, tc.expectErr)
			continue
		}
		if ok && (string(a.Body) != tc.expectBody || a.Status != tc.expectStatus) {
			t.Errorf("%s: answer %d %q, want %d %q", tc.name, a.Status, a.Body, tc.expectStatus, tc.expectBody)
		}
	}

	// Asana: the answer echoes the secret and hands it over to be
	// stored; it signs once learned.
	a, _, _ := verify.Handshake(asana, verify.Request{Method: http.MethodPost, Header: asanaHeader}, now)
	if a.Header.Get("X-Hook-Secret") != "b537207f20cbfa02357cf448134da559" || a.LearnedSecret != "b537207f20cbfa02357cf448134da559" {
		t.Fatalf("asana answer %+v", a)
	}
	body := []byte(`{"events":[{"action":"added","resource":{"gid":"1"}}]}`)
	signed := http.Header{}
	signed.Set("X-Hook-Signature", hex.EncodeToString(mac("b537207f20cbfa02357cf448134da559", string(body))))
	if err := asana.Verify(verify.Request{Header: signed, Body: body}, now); !errors.Is(err, verify.ErrSignatureMismatch) {
		t.Fatalf("before learning: %v, want a mismatch", err)
	}
	asana.(verify.SecretLearner).LearnSecret(a.LearnedSecret)
	asana.(verify.SecretLearner).LearnSecret(a.LearnedSecret)
	if err := asana.Verify(verify.Request{Header: signed, Body: body}, now); err != nil {
		t.Fatalf("after learning: %v", err)
	}
	for _, bad := range []string{"has space", string(make([]byte, 300))} {
		h := http.Header{}
		h.Set("X-Hook-Secret", bad)
		if _, ok, err := verify.Handshake(asana, verify.Request{Method: http.MethodPost, Header: h}, now); ok || !errors.Is(err, verify.ErrHandshakeRefused) {
			t.Errorf("asana secret %q: ok %v err %v", bad[:min(len(bad), 10)], ok, err)
		}
	}
}
