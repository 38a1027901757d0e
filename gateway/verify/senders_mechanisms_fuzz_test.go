package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"
)

// FuzzKVSignatureHeader drives the k=v signature header (TikTok,
// Calendly, PagerDuty, Sanity, Orb): no panic; every refusal wraps a
// sentinel; only a value holding the valid signature verifies; and the
// valid header still verifies with any junk pair appended.
func FuzzKVSignatureHeader(f *testing.F) {
	body := []byte(`{"event":"invitee.created","payload":{"amount":1000}}`)
	key := "cal-key"
	ts := "1700000000"
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(ts + "." + string(body)))
	good := "t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))
	for _, s := range []string{good, "t=1,v1=", "v1=" + strings.Repeat("0", 64), ",,;;", "t=" + ts + ";v1=zz;v1=" + good[len("t="+ts+",v1="):], "=", "t", " t = 1 , v1 = x "} {
		f.Add(s, "")
	}
	f.Add(good, ",v0=abc")
	v, err := New(Config{Scheme: SchemeCalendly, Secrets: []string{"other", key}})
	if err != nil {
		f.Fatal(err)
	}
	g := v.(*presetScheme).genericScheme
	f.Fuzz(func(t *testing.T, value, junk string) {
		var sg signatures
		g.readPairs(value, &sg, 32)
		if sg.n < 0 || sg.n > maxSignatures {
			t.Fatalf("readPairs(%q) read %d signatures", value, sg.n)
		}
		h := http.Header{}
		h.Set("Calendly-Webhook-Signature", value)
		err := v.Verify(Request{Header: h, Body: body}, testNow)
		if err != nil && !isSentinel(err) {
			t.Fatalf("%q: %v wraps no sentinel", value, err)
		}
		if err == nil && !strings.Contains(strings.ToLower(value), good[len("t="+ts+",v1="):]) {
			t.Fatalf("accepted %q", value)
		}
		if strings.ContainsAny(junk, "\r\n\x00") {
			return
		}
		h.Set("Calendly-Webhook-Signature", good+","+strings.ReplaceAll(junk, "v1=", "x="))
		if err := v.Verify(Request{Header: h, Body: body}, testNow); err != nil && !strings.Contains(junk, "t=") {
			t.Fatalf("valid header plus %q refused: %v", junk, err)
		}
	})
}

// FuzzJWS drives Netlify's JWS parser: no panic, refusals wrap
// ErrMalformedSignature, and only the token signed for the body and key
// verifies.
func FuzzJWS(f *testing.F) {
	body := []byte(`{"id":"d1","state":"ready"}`)
	good := signJWS([]byte("netlify-secret"), body)
	for _, s := range []string{good, "a.b.c", "..", "eyJhbGciOiJub25lIn0.e30.", good + ".x", strings.Replace(good, ".", "", 1), "e30.e30.e30"} {
		f.Add(s)
	}
	v := newNetlify([]string{"netlify-secret"})
	f.Fuzz(func(t *testing.T, token string) {
		if _, _, _, err := parseJWS(netlifyHeader, token); err != nil && !errors.Is(err, ErrMalformedSignature) {
			t.Fatalf("parseJWS: %v", err)
		}
		h := http.Header{}
		h.Set(netlifyHeader, token)
		err := v.Verify(Request{Header: h, Body: body}, testNow)
		if err != nil && !isSentinel(err) {
			t.Fatalf("%v wraps no sentinel", err)
		}
		if err == nil && strings.TrimSpace(token) != good {
			// The same token, as Header.Set trims it, is the only one.
			t.Fatalf("accepted %q", token)
		}
	})
}
