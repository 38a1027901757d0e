package verify

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestGenericHMACKeys checks the keys the generic hmac scheme grew for
// issue 32 against vectors computed with Python's hmac module (an
// independent implementation):
//
//	hmac.new(b'acme-secret', b'POST' + url + b'\n1700000000123\n' + body, hashlib.sha512).hexdigest()
//	base64(hmac.new(b'acme-secret', b'1700000000.' + body, hashlib.sha1).digest())
func TestGenericHMACKeys(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"evt_1","amount":1000}`)
	const sha512Hex = "d8b071129a0eb6141d841acf65f32df596dd4df8472ce7d3fb1d987c56a715469ec4c032828c19b243a71964019369722dc254393419a5a645f4a9dda1b876d3"
	const sha1B64 = "qrJ7VloVj2tKqcV+DBtlXz+/Ju8="
	ms := Config{Scheme: SchemeHMAC, Secrets: []string{"rotated-out", "acme-secret"}, Algorithm: AlgorithmSHA512,
		Header: "X-Acme-Signature", TimestampHeader: "X-Acme-Time", PublicURL: "https://h.example/webhooks/acme",
		SignedContent: "{method}{url}\n{timestamp_ms}\n{body}"}
	kv := Config{Scheme: SchemeHMAC, Secrets: []string{"acme-secret"}, Algorithm: AlgorithmSHA1, Encoding: "base64",
		Header: "Acme-Signature", SignatureKey: "v1", TimestampKey: "t"}
	at := time.UnixMilli(1700000000123)
	for _, tc := range []struct {
		name      string
		cfg       Config
		header    http.Header
		method    string
		now       time.Time
		expectErr error
	}{
		{"sha512, ms, method and url", ms, http.Header{"X-Acme-Signature": {"sha512=" + sha512Hex}, "X-Acme-Time": {"1700000000123"}}, "POST", at, nil},
		{"another method", ms, http.Header{"X-Acme-Signature": {"sha512=" + sha512Hex}, "X-Acme-Time": {"1700000000123"}}, "PUT", at, ErrSignatureMismatch},
		{"ms timestamp stale", ms, http.Header{"X-Acme-Signature": {"sha512=" + sha512Hex}, "X-Acme-Time": {"1700000000123"}}, "POST", at.Add(6 * time.Minute), ErrTimestampOutsideTolerance},
		{"seconds where ms are due", ms, http.Header{"X-Acme-Signature": {"sha512=" + sha512Hex}, "X-Acme-Time": {"1700000000"}}, "POST", at, ErrTimestampOutsideTolerance},
		{"sha256-sized signature", ms, http.Header{"X-Acme-Signature": {"sha512=" + sha512Hex[:64]}, "X-Acme-Time": {"1700000000123"}}, "POST", at, ErrMalformedSignature},
		{"k=v, sha1, base64", kv, http.Header{"Acme-Signature": {"t=1700000000,v1=" + sha1B64}}, "POST", at, nil},
		{"k=v, rotation list", kv, http.Header{"Acme-Signature": {"t=1700000000,v1=AAAAAAAAAAAAAAAAAAAAAAAAAAA=,v1=" + sha1B64}}, "POST", at, nil},
		{"k=v, shifted t", kv, http.Header{"Acme-Signature": {"t=1700000001,v1=" + sha1B64}}, "POST", at, ErrSignatureMismatch},
		{"k=v, no t", kv, http.Header{"Acme-Signature": {"v1=" + sha1B64}}, "POST", at, ErrMalformedSignature},
		{"k=v, no v1", kv, http.Header{"Acme-Signature": {"t=1700000000,v0=" + sha1B64}}, "POST", at, ErrMalformedSignature},
	} {
		v, err := New(tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		err = v.Verify(Request{Method: tc.method, Header: tc.header, Body: body}, tc.now)
		if !errors.Is(err, tc.expectErr) || tc.expectErr == nil && err != nil {
			t.Errorf("%s: Verify = %v, want %v", tc.name, err, tc.expectErr)
		}
	}
	for _, c := range []Config{ms, kv} {
		c.Secrets = []string{"acme-secret"}
		h, _, err := Sign(c, body, at, "")
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := New(c); v.Verify(Request{Method: http.MethodPost, Header: h, Body: body}, at) != nil {
			t.Errorf("%s: Sign does not verify: %v", c.Header, h)
		}
	}

	for _, tc := range []struct {
		cfg       Config
		expectKey string
	}{
		{Config{Scheme: SchemeHMAC, Secrets: []string{"s"}, Algorithm: "md5"}, "verify.algorithm: \"md5\" is not"},
		{Config{Scheme: SchemeHMACSHA256, Secrets: []string{"s"}, Algorithm: AlgorithmSHA1}, "verify.algorithm: hmac-sha256 is SHA-256"},
		{Config{Scheme: SchemeHMAC, Secrets: []string{"s"}, TimestampKey: "t"}, "verify.timestamp_key: needs verify.signature_key"},
		{Config{Scheme: SchemeHMAC, Secrets: []string{"s"}, SignatureKey: "v1", TimestampKey: "t", TimestampHeader: "X-T"}, "verify.timestamp_key: the timestamp is either"},
		{Config{Scheme: SchemeHMAC, Secrets: []string{"s"}, TimestampHeader: "X-T", TimestampFormat: "iso"}, "verify.timestamp_format: \"iso\" is not"},
		{Config{Scheme: SchemeHMAC, Secrets: []string{"s"}, SignedContent: "{url}{body}"}, "verify.public_url: required by {url}"},
		{Config{Scheme: SchemeHMAC, Secrets: []string{"s"}, PublicURL: "https://x/y"}, "verify.public_url: only used with {url}"},
		{Config{Scheme: SchemeHMAC, Secrets: []string{"s"}, SignedContent: "{header:Bad Name}{body}"}, "verify.signed_content: {header:Bad Name}"},
		{Config{Scheme: SchemeHMAC, Secrets: []string{"s"}, TimestampHeader: "X-T", TimestampFormat: TimestampRFC3339, SignedContent: "{timestamp_ms}{body}"}, "verify.signed_content: {timestamp_ms} reads"},
		{Config{Scheme: SchemeStripe, Secrets: []string{"s"}, SignatureKey: "v1"}, "verify.signature_key: only used by scheme hmac"},
		{Config{Scheme: SchemeGitHub, Secrets: []string{"s"}, SubscriptionConfirmation: "show"}, "verify.subscription_confirmation: only used by scheme sns"},
		{Config{Scheme: SchemeSNS, Secrets: []string{"arn:aws:sns:us-east-1:123456789012:t"}, SubscriptionConfirmation: "maybe"}, "verify.subscription_confirmation: \"maybe\""},
		{Config{Scheme: SchemeHubSpot, Secrets: []string{"s"}}, "verify.public_url: required by {url}"},
		{Config{Scheme: SchemePostmark, Secrets: []string{"no-colon"}}, "verify.secrets[0]: want user:password"},
		{Config{Scheme: SchemeTelnyx, Secrets: []string{"abcd"}}, "verify.secrets[0]: want the account's public key"},
	} {
		err := tc.cfg.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), tc.expectKey) {
			t.Errorf("%+v: Validate = %v, want %q…", tc.cfg, err, tc.expectKey)
		}
	}
}
