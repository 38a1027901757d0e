package verify_test

// Oracles from outside this repository for the senders of issue 32: the
// providers' published test vectors (orb-go, Sanity's webhook-toolkit,
// go-pagerduty), the Standard Webhooks reference library for the
// senders that use it (with Polar's SDK's handling of its secret), and
// golang-jwt for Netlify's JWS. docs/providers.md lists, per sender,
// which oracle checks it.

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/webhookd/webhookd/gateway/verify"
)

// TestOrbPublishedVector: orb-go's webhook_test.go (TestVerifySignature).
func TestOrbPublishedVector(t *testing.T) {
	t.Parallel()
	const (
		secret    = "c-UGKYdnhHh436B_sMouYAPUvXyWpzOdunZBV5dFSD8"
		payload   = `{"id": "o4mmewpfNNTnjfZc", "created_at": "2024-03-27T15:42:29+00:00", "type": "resource_event.test", "properties": {"message": "A test webhook from Orb. Happy testing!"}}`
		signature = "9d25de966891ab0bc18754faf8d83d0980b44ae330fcc130b41a6cf3daf1f391"
		timestamp = "2024-03-27T15:42:29.551"
	)
	fakeNow, _ := time.Parse("2006-01-02T15:04:05.999999999", timestamp)
	v, err := verify.New(verify.Config{Scheme: verify.SchemeOrb, Secrets: []string{"rotated-out", secret}})
	if err != nil {
		t.Fatal(err)
	}
	h := func(sigs ...string) http.Header {
		return http.Header{"X-Orb-Timestamp": {timestamp}, "X-Orb-Signature": sigs}
	}
	for _, tc := range []struct {
		name      string
		header    http.Header
		now       time.Time
		expectErr error
	}{
		{"valid signature", h("v1=" + signature), fakeNow, nil},
		{"too old", h("v1=" + signature), fakeNow.Add(6 * time.Minute), verify.ErrTimestampOutsideTolerance},
		{"too new", h("v1=" + signature), fakeNow.Add(-6 * time.Minute), verify.ErrTimestampOutsideTolerance},
		{"multiple signatures", h("v1=my-invalid-signature", "v1="+signature), fakeNow, nil},
		{"different version", h("v2=" + signature), fakeNow, verify.ErrMalformedSignature},
		{"multiple versions", h("v2="+signature, "v1="+signature), fakeNow, nil},
		{"version missing", h(signature), fakeNow, verify.ErrMalformedSignature},
	} {
		err := v.Verify(verify.Request{Header: tc.header, Body: []byte(payload)}, tc.now)
		if !errors.Is(err, tc.expectErr) || tc.expectErr == nil && err != nil {
			t.Errorf("%s: Verify = %v, want %v", tc.name, err, tc.expectErr)
		}
	}
	other, _ := verify.New(verify.Config{Scheme: verify.SchemeOrb, Secrets: []string{"foo"}})
	if err := other.Verify(verify.Request{Header: h("v1=" + signature), Body: []byte(payload)}, fakeNow); !errors.Is(err, verify.ErrSignatureMismatch) {
		t.Errorf("invalid secret: Verify = %v", err)
	}
}

// TestSanityPublishedVectors: Sanity's webhook-toolkit
// (test/signature.test.ts).
func TestSanityPublishedVectors(t *testing.T) {
	t.Parallel()
	v, err := verify.New(verify.Config{Scheme: verify.SchemeSanity, Secrets: []string{"rotated-out", "test"}})
	if err != nil {
		t.Fatal(err)
	}
	at := time.UnixMilli(1633519811129)
	for _, tc := range []struct {
		name, sig, body string
		expectErr       error
	}{
		{"valid", "t=1633519811129,v1=tLa470fx7qkLLEcMOcEUFuBbRSkGujyskxrNXcoh0N0", `{"_id":"resume"}`, nil},
		{"space after comma", "t=1633519811129, v1=tLa470fx7qkLLEcMOcEUFuBbRSkGujyskxrNXcoh0N0", `{"_id":"resume"}`, nil},
		{"timestamp", "t=1633519811128,v1=tLa470fx7qkLLEcMOcEUFuBbRSkGujyskxrNXcoh0N0", `{"_id":"resume"}`, verify.ErrSignatureMismatch},
		{"payload", "t=1633519811129,v1=tLa470fx7qkLLEcMOcEUFuBbRSkGujyskxrNXcoh0N0", `{"_id":"structure"}`, verify.ErrSignatureMismatch},
		{"hash", "t=1633519811129,v1=tLa470fx7qkLLEcMOcEUFuBbRSkGujyskxrNXcoh0N1", `{"_id":"resume"}`, verify.ErrMalformedSignature},
		{"version", "t=1633519811129,v5=tLa470fx7qkLLEcMOcEUFuBbRSkGujyskxrNXcoh0N0", `{"_id":"resume"}`, verify.ErrMalformedSignature},
	} {
		h := http.Header{}
		h.Set("sanity-webhook-signature", tc.sig)
		if err := v.Verify(verify.Request{Header: h, Body: []byte(tc.body)}, at); !errors.Is(err, tc.expectErr) || tc.expectErr == nil && err != nil {
			t.Errorf("%s: Verify = %v, want %v", tc.name, err, tc.expectErr)
		}
	}
	// encodeSignatureHeader's vector, which Sign must reproduce.
	body := []byte(`{"title":"GROQ-Hooks are neat"}`)
	h, _, err := verify.Sign(verify.Config{Scheme: verify.SchemeSanity, Secrets: []string{"try-me"}}, body, time.UnixMilli(1633518820676), "")
	if err != nil || h.Get("sanity-webhook-signature") != "t=1633518820676,v1=e7C9h2sfbFfc4V7TEz7PSOp4IoNzl0UdVsBV-1wgdeA" {
		t.Errorf("Sign = %q, %v; want webhook-toolkit's t=1633518820676,v1=e7C9h2sfbFfc4V7TEz7PSOp4IoNzl0UdVsBV-1wgdeA", h.Get("sanity-webhook-signature"), err)
	}
}

// pagerdutyVectorBody and pagerdutyVectorSecret are go-pagerduty's
// webhookv3 test vector (webhookv3/webhookv3_test.go).
const (
	pagerdutyVectorSecret = "lDQHScfUeXUKaQRNF+8XIiDKZ7XX3itBAYzwU0TARw8lJqRnkKl2iB1anSb0Z+IK"
	pagerdutyVectorBody   = `{"event":{"id":"01BWDWL3NYY7LUFPZCC28QUCMK","event_type":"incident.priority_updated","resource_type":"incident","occurred_at":"2021-04-26T17:36:27.458Z","agent":{"html_url":"https://acme.pagerduty.com/users/PLH1HKV","id":"PLH1HKV","self":"https://api.pagerduty.com/users/PLH1HKV","summary":"Tenex Engineer","type":"user_reference"},"client":null,"data":{"id":"PGR0VU2","type":"incident","self":"https://api.pagerduty.com/incidents/PGR0VU2","html_url":"https://acme.pagerduty.com/incidents/PGR0VU2","number":2,"status":"triggered","title":"A little bump in the road","service":{"html_url":"https://acme.pagerduty.com/services/PF9KMXH","id":"PF9KMXH","self":"https://api.pagerduty.com/services/PF9KMXH","summary":"API Service","type":"service_reference"},"assignees":[{"html_url":"https://acme.pagerduty.com/users/PTUXL6G","id":"PTUXL6G","self":"https://api.pagerduty.com/users/PTUXL6G","summary":"User 123","type":"user_reference"}],"escalation_policy":{"html_url":"https://acme.pagerduty.com/escalation_policies/PUS0KTE","id":"PUS0KTE","self":"https://api.pagerduty.com/escalation_policies/PUS0KTE","summary":"Default","type":"escalation_policy_reference"},"teams":[{"html_url":"https://acme.pagerduty.com/teams/PFCVPS0","id":"PFCVPS0","self":"https://api.pagerduty.com/teams/PFCVPS0","summary":"Engineering","type":"team_reference"}],"priority":{"html_url":"https://acme.pagerduty.com/account/incident_priorities","id":"PSO75BM","self":"https://api.pagerduty.com/priorities/PSO75BM","summary":"P1","type":"priority_reference"},"urgency":"high","conference_bridge":{"conference_number":1000,"conference_url":"https://example.com"},"resolve_reason":null}}}`
)

func TestPagerDutyPublishedVector(t *testing.T) {
	t.Parallel()
	v, err := verify.New(verify.Config{Scheme: verify.SchemePagerDuty, Secrets: []string{"rotated-out", pagerdutyVectorSecret}})
	if err != nil {
		t.Fatal(err)
	}
	const valid = "v1=0c0b9495b893a39e70d1fea2fe11fbe0a825f88b9f67846f6cc07dd2bc5476cd"
	const other = "v1=7020c8a7ec668a9b7012bc3dd82e483394b038f4230acc6785efbf2a7d8bcaf5"
	for _, tc := range []struct {
		name, sig, body string
		expectErr       error
	}{
		{"valid", valid, pagerdutyVectorBody, nil},
		{"two signatures while rotating", other + "," + valid, pagerdutyVectorBody, nil},
		{"mismatch", other, pagerdutyVectorBody, verify.ErrSignatureMismatch},
		{"missing", "", pagerdutyVectorBody, verify.ErrMissingSignature},
		{"altered body", valid, pagerdutyVectorBody + " ", verify.ErrSignatureMismatch},
	} {
		h := http.Header{}
		h.Set("X-PagerDuty-Signature", tc.sig)
		if err := v.Verify(verify.Request{Header: h, Body: []byte(tc.body)}, time.Now()); !errors.Is(err, tc.expectErr) || tc.expectErr == nil && err != nil {
			t.Errorf("%s: Verify = %v, want %v", tc.name, err, tc.expectErr)
		}
	}
	h, _, err := verify.Sign(verify.Config{Scheme: verify.SchemePagerDuty, Secrets: []string{pagerdutyVectorSecret}}, []byte(pagerdutyVectorBody), time.Now(), "")
	if err != nil || h.Get("X-PagerDuty-Signature") != valid {
		t.Errorf("Sign = %q, %v; want go-pagerduty's %s", h.Get("X-PagerDuty-Signature"), err, valid)
	}
}

// TestStandardSendersAgainstReferenceLibrary: Clerk and Resend (Svix)
// and Polar sign with Standard Webhooks; the reference library signs
// and verifies both ways. Polar's secret goes in as its SDK's
// validateEvent hands it over: base64 of the secret's bytes.
func TestStandardSendersAgainstReferenceLibrary(t *testing.T) {
	t.Parallel()
	body := []byte(`{"data":{"id":"user_29w83sxmDNGwOuEthce5gg56FcC"},"object":"event","type":"user.created"}`)
	now := time.Now()
	for _, tc := range []struct {
		scheme, secret, libSecret string
	}{
		{verify.SchemeClerk, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
		{verify.SchemeResend, "whsec_cmVzZW5kLWN1cnJlbnQ=", "whsec_cmVzZW5kLWN1cnJlbnQ="},
		{verify.SchemePolar, "polar_whs_abc123", base64.StdEncoding.EncodeToString([]byte("polar_whs_abc123"))},
	} {
		cfg := verify.Config{Scheme: tc.scheme, Secrets: []string{tc.secret}}
		v, err := verify.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		wh, err := standardwebhooks.NewWebhook(tc.libSecret)
		if err != nil {
			t.Fatal(err)
		}
		sig, err := wh.Sign("msg_2Lx1", now, body)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		h.Set("svix-id", "msg_2Lx1")
		h.Set("svix-timestamp", strconv.FormatInt(now.Unix(), 10))
		h.Set("svix-signature", sig)
		if err := v.Verify(verify.Request{Header: h, Body: body}, now); err != nil {
			t.Errorf("%s: the reference library's signature is refused: %v", tc.scheme, err)
		}
		sh, _, err := verify.Sign(cfg, body, now, "msg_2Lx2")
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(body, sh); err != nil {
			t.Errorf("%s: the reference library refuses Sign: %v", tc.scheme, err)
		}
		other, _ := standardwebhooks.NewWebhook("whsec_" + base64.StdEncoding.EncodeToString([]byte("other")))
		if err := other.Verify(body, sh); err == nil {
			t.Errorf("%s: Sign verifies under another secret", tc.scheme)
		}
	}
}

// TestNetlifyAgainstGolangJWT: Netlify's X-Webhook-Signature is an
// HS256 JWS; golang-jwt parses what Sign makes and signs what Verify
// takes, and alg "none" or another key is refused.
func TestNetlifyAgainstGolangJWT(t *testing.T) {
	t.Parallel()
	const secret = "netlify-jws-secret"
	body := []byte(`{"id":"5fd3c6e1e6f1a2000800c0f3","site_id":"s1","state":"ready"}`)
	sum := sha256.Sum256(body)
	cfg := verify.Config{Scheme: verify.SchemeNetlify, Secrets: []string{"rotated-out", secret}}
	v, err := verify.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	signed := func(method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(method, claims).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	good := jwt.MapClaims{"iss": "netlify", "sha256": hex.EncodeToString(sum[:])}
	for _, tc := range []struct {
		name      string
		token     string
		expectErr error
	}{
		{"golang-jwt HS256", signed(jwt.SigningMethodHS256, []byte(secret), good), nil},
		{"other key", signed(jwt.SigningMethodHS256, []byte("other"), good), verify.ErrSignatureMismatch},
		{"HS512", signed(jwt.SigningMethodHS512, []byte(secret), good), verify.ErrMalformedSignature},
		{"alg none", signed(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, good), verify.ErrMalformedSignature},
		{"another body's hash", signed(jwt.SigningMethodHS256, []byte(secret), jwt.MapClaims{"iss": "netlify", "sha256": hex.EncodeToString(make([]byte, 32))}), verify.ErrSignatureMismatch},
		{"not netlify", signed(jwt.SigningMethodHS256, []byte(secret), jwt.MapClaims{"iss": "other", "sha256": hex.EncodeToString(sum[:])}), verify.ErrSignatureMismatch},
	} {
		h := http.Header{}
		h.Set("X-Webhook-Signature", tc.token)
		if err := v.Verify(verify.Request{Header: h, Body: body}, time.Now()); !errors.Is(err, tc.expectErr) || tc.expectErr == nil && err != nil {
			t.Errorf("%s: Verify = %v, want %v", tc.name, err, tc.expectErr)
		}
	}
	h, _, err := verify.Sign(verify.Config{Scheme: verify.SchemeNetlify, Secrets: []string{secret}}, body, time.Now(), "")
	if err != nil {
		t.Fatal(err)
	}
	var claims jwt.MapClaims
	tok, err := jwt.ParseWithClaims(h.Get("X-Webhook-Signature"), &claims, func(*jwt.Token) (any, error) { return []byte(secret), nil },
		jwt.WithValidMethods([]string{"HS256"}), jwt.WithIssuer("netlify"))
	if err != nil || !tok.Valid || claims["sha256"] != hex.EncodeToString(sum[:]) {
		t.Errorf("golang-jwt refuses Sign: %v %v", err, claims)
	}
}
