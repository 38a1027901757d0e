package verify

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"net/http"
	"testing"
)

// senderFuzzConfigs are the senders of issue 15 whose parsers the
// fuzzers below drive: one config each, with a valid signature header
// where the scheme has one.
func senderFuzzConfigs() []struct {
	cfg    Config
	header string
} {
	pub := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)).Public().(ed25519.PublicKey)
	return []struct {
		cfg    Config
		header string
	}{
		{Config{Scheme: SchemeMeta, Secrets: []string{"s"}, VerifyToken: "vt"}, githubHeader},
		{Config{Scheme: SchemeZoom, Secrets: []string{"s"}}, zoomHeader},
		{Config{Scheme: SchemeDiscord, Secrets: []string{hex.EncodeToString(pub)}}, discordHeader},
		{Config{Scheme: SchemeTelegram, Secrets: []string{"tok"}}, telegramHeader},
		{Config{Scheme: SchemeSendGrid, Secrets: []string{"MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA=="}}, sendgridHeader},
		{Config{Scheme: SchemeMSGraph, Secrets: []string{"state"}}, ""},
		{Config{Scheme: SchemeGitLab, Secrets: []string{"tok"}}, gitlabHeader},
		{Config{Scheme: SchemeMailgun, Secrets: []string{"s"}}, ""},
		{Config{Scheme: SchemeSquare, Secrets: []string{"s"}, PublicURL: "https://x/y"}, squareHeader},
		{Config{Scheme: SchemeAdyen, Secrets: []string{"00ff"}}, ""},
		{Config{Scheme: SchemePaddle, Secrets: []string{"s"}}, paddleHeader},
		{Config{Scheme: SchemeRazorpay, Secrets: []string{"s"}}, razorpayHeader},
		{Config{Scheme: SchemeLinear, Secrets: []string{"s"}}, linearHeader},
	}
}

// FuzzSenderVerify runs every new scheme over an arbitrary signature
// header value and body (with a valid timestamp header where there is
// one): no panic, and every refusal wraps a sentinel.
func FuzzSenderVerify(f *testing.F) {
	f.Add(uint8(0), "sha256="+hex.EncodeToString(make([]byte, 32)), []byte(`{"object":"page"}`))
	f.Add(uint8(5), "", []byte(`{"value":[{"clientState":"state"},{"clientState":1}]}`))
	f.Add(uint8(7), "", []byte(`{"signature":{"timestamp":"1700000000","token":"t","signature":"zz"}}`))
	f.Add(uint8(9), "", []byte(`{"notificationItems":[{"NotificationRequestItem":{"additionalData":{"hmacSignature":"x"}}}]}`))
	f.Add(uint8(10), "ts=1700000000;h1=ab;h1=;x", []byte(`{}`))
	f.Add(uint8(12), "00", []byte(`{"webhookTimestamp":1e400}`))
	cfgs := senderFuzzConfigs()
	f.Fuzz(func(t *testing.T, which uint8, value string, body []byte) {
		c := cfgs[int(which)%len(cfgs)]
		v, err := New(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		if c.header != "" {
			h.Set(c.header, value)
		}
		for _, ts := range []string{zoomTimestampHeader, discordTimestampHeader, sendgridTimestampHeader} {
			h.Set(ts, "1700000000")
		}
		err = v.Verify(Request{Method: http.MethodPost, Header: h, Body: body}, testNow)
		if err != nil && !isSentinel(err) {
			t.Fatalf("%s: error %v wraps no sentinel", c.cfg.Scheme, err)
		}
		if err == nil && c.cfg.Scheme != SchemeMSGraph && c.cfg.Scheme != SchemeTelegram && c.cfg.Scheme != SchemeGitLab {
			t.Fatalf("%s: accepted %q %q", c.cfg.Scheme, value, body)
		}
	})
}

// FuzzHandshake runs every handshake over an arbitrary method, query and
// body: no panic; an answer only with status 200 or 204; a refusal wraps
// ErrHandshakeRefused or a verification sentinel.
func FuzzHandshake(f *testing.F) {
	f.Add(uint8(0), "GET", "hub.mode=subscribe&hub.verify_token=vt&hub.challenge=1", []byte{})
	f.Add(uint8(1), "POST", "", []byte(`{"event":"endpoint.url_validation","payload":{"plainToken":"x"}}`))
	f.Add(uint8(2), "POST", "", []byte(`{"type":1}`))
	f.Add(uint8(5), "POST", "validationToken=%zz", []byte{})
	cfgs := senderFuzzConfigs()
	f.Fuzz(func(t *testing.T, which uint8, method, query string, body []byte) {
		c := cfgs[int(which)%len(cfgs)]
		v, err := New(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		a, ok, err := Handshake(v, Request{Method: method, RawQuery: query, Header: http.Header{}, Body: body}, testNow)
		if err != nil && !errors.Is(err, ErrHandshakeRefused) && !isSentinel(err) {
			t.Fatalf("%s: error %v wraps no sentinel", c.cfg.Scheme, err)
		}
		if ok && (err != nil || a.Status != http.StatusOK && a.Status != http.StatusNoContent) {
			t.Fatalf("%s: answer %+v with %v", c.cfg.Scheme, a, err)
		}
		if ok && c.cfg.Scheme != SchemeMeta && c.cfg.Scheme != SchemeMSGraph {
			// Zoom's and Discord's handshakes are signed: no header here.
			t.Fatalf("%s: answered an unsigned handshake", c.cfg.Scheme)
		}
	})
}
