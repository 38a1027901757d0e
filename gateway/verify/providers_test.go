package verify_test

// Cross-checks against the providers' own code, used as independent
// signers and verifiers: stripe-go's webhook package, the Standard Webhooks
// reference Go library, and go-github's signature validation.

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/google/go-github/v75/github"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	stripewebhook "github.com/stripe/stripe-go/v82/webhook"

	"github.com/webhookd/webhookd/gateway/verify"
)

var payload = []byte(`{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","type":"customer.created","data":{"object":{"id":"cus_1"}}}`)

func TestStripeAgainstStripeGo(t *testing.T) {
	t.Parallel()
	const oldSecret, newSecret = "whsec_test_old_9f8e7d", "whsec_test_new_1a2b3c"
	v, err := verify.New(verify.Config{Scheme: verify.SchemeStripe, Secrets: []string{oldSecret, newSecret}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	for _, tc := range []struct {
		name      string
		secret    string
		scheme    string
		at        time.Time
		expectErr error
	}{
		{"signed by stripe-go", oldSecret, "", now, nil},
		{"rotated secret", newSecret, "", now, nil},
		{"wrong secret", "whsec_other", "", now, verify.ErrSignatureMismatch},
		{"stale", oldSecret, "", now.Add(-6 * time.Minute), verify.ErrTimestampOutsideTolerance},
		{"future", oldSecret, "", now.Add(6 * time.Minute), verify.ErrTimestampOutsideTolerance},
		{"v0 scheme only", oldSecret, "v0", now, verify.ErrMalformedSignature},
	} {
		sp := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{
			Payload: payload, Secret: tc.secret, Timestamp: tc.at, Scheme: tc.scheme,
		})
		h := http.Header{}
		h.Set("Stripe-Signature", sp.Header)
		err := v.Verify(verify.Request{Header: h, Body: sp.Payload}, now)
		if !errors.Is(err, tc.expectErr) {
			t.Errorf("%s: Verify = %v, want %v", tc.name, err, tc.expectErr)
		}
	}

	// stripe-go accepts what Sign produces (it checks against the wall clock).
	h, _, err := verify.Sign(verify.Config{Scheme: verify.SchemeStripe, Secrets: []string{oldSecret}}, payload, time.Now(), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := stripewebhook.ValidatePayload(payload, h.Get("Stripe-Signature"), oldSecret); err != nil {
		t.Fatalf("stripe-go rejects Sign: %v", err)
	}
	if err := stripewebhook.ValidatePayload(payload, h.Get("Stripe-Signature"), newSecret); err == nil {
		t.Fatal("stripe-go accepts Sign under another secret")
	}
}

func TestStandardAgainstReferenceLibrary(t *testing.T) {
	t.Parallel()
	// Secrets in the whsec_<base64> form; the reference library's example key.
	const oldSecret, newSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_dGhpcy1pcy1hLW5ldy1zZWNyZXQtZm9yLXRlc3Rz"
	v, err := verify.New(verify.Config{Scheme: verify.SchemeStandard, Secrets: []string{oldSecret, newSecret}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	for _, tc := range []struct {
		name      string
		secret    string
		at        time.Time
		svix      bool
		body      []byte
		expectErr error
	}{
		{"signed by reference library", oldSecret, now, false, payload, nil},
		{"svix header names", oldSecret, now, true, payload, nil},
		{"rotated secret", newSecret, now, false, payload, nil},
		{"wrong secret", "whsec_d3Jvbmctc2VjcmV0", now, false, payload, verify.ErrSignatureMismatch},
		{"tampered body", oldSecret, now, false, bytes.Replace(payload, []byte("cus_1"), []byte("cus_2"), 1), verify.ErrSignatureMismatch},
		{"stale", oldSecret, now.Add(-6 * time.Minute), false, payload, verify.ErrTimestampOutsideTolerance},
		{"future", oldSecret, now.Add(6 * time.Minute), true, payload, verify.ErrTimestampOutsideTolerance},
	} {
		wh, err := standardwebhooks.NewWebhook(tc.secret)
		if err != nil {
			t.Fatal(err)
		}
		sig, err := wh.Sign("msg_p5jXN8AQM9LWM0D4loKWxJek", tc.at, payload)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		prefix := "webhook-"
		if tc.svix {
			prefix = "svix-"
		}
		h.Set(prefix+"id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
		h.Set(prefix+"timestamp", strconv.FormatInt(tc.at.Unix(), 10))
		h.Set(prefix+"signature", sig)
		err = v.Verify(verify.Request{Header: h, Body: tc.body}, now)
		if !errors.Is(err, tc.expectErr) {
			t.Errorf("%s: Verify = %v, want %v", tc.name, err, tc.expectErr)
		}
	}

	// The reference library accepts what Sign produces (wall clock again).
	h, _, err := verify.Sign(verify.Config{Scheme: verify.SchemeStandard, Secrets: []string{newSecret}}, payload, time.Now(), "msg_2")
	if err != nil {
		t.Fatal(err)
	}
	wh, _ := standardwebhooks.NewWebhook(newSecret)
	if err := wh.Verify(payload, h); err != nil {
		t.Fatalf("reference library rejects Sign: %v", err)
	}
	other, _ := standardwebhooks.NewWebhook(oldSecret)
	if err := other.Verify(payload, h); err == nil {
		t.Fatal("reference library accepts Sign under another secret")
	}
}

func TestGitHubAgainstGoGitHub(t *testing.T) {
	t.Parallel()
	const oldSecret, newSecret = "gh-webhook-secret-old", "gh-webhook-secret-new"
	v, err := verify.New(verify.Config{Scheme: verify.SchemeGitHub, Secrets: []string{oldSecret, newSecret}})
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{oldSecret, newSecret} {
		h, _, err := verify.Sign(verify.Config{Scheme: verify.SchemeGitHub, Secrets: []string{secret}}, payload, time.Now(), "d1e2")
		if err != nil {
			t.Fatal(err)
		}
		sig := h.Get("X-Hub-Signature-256")
		// go-github validates Sign's output …
		if err := github.ValidateSignature(sig, payload, []byte(secret)); err != nil {
			t.Fatalf("go-github rejects Sign: %v", err)
		}
		got, err := github.ValidatePayloadFromBody("application/json", bytes.NewReader(payload), sig, []byte(secret))
		if err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("go-github ValidatePayloadFromBody: %v", err)
		}
		if err := github.ValidateSignature(sig, payload, []byte("other")); err == nil {
			t.Fatal("go-github accepts Sign under another secret")
		}
		// … and our verifier agrees with it in both directions.
		if err := v.Verify(verify.Request{Header: h, Body: payload}, time.Now()); err != nil {
			t.Fatalf("Verify: %v", err)
		}
		tampered := append(append([]byte(nil), payload...), '\n')
		if github.ValidateSignature(sig, tampered, []byte(secret)) == nil {
			t.Fatal("go-github accepts a tampered body")
		}
		if err := v.Verify(verify.Request{Header: h, Body: tampered}, time.Now()); !errors.Is(err, verify.ErrSignatureMismatch) {
			t.Fatalf("Verify tampered = %v", err)
		}
	}
	// go-github's full request path: a request signed by Sign validates.
	h, _, _ := verify.Sign(verify.Config{Scheme: verify.SchemeGitHub, Secrets: []string{oldSecret}}, payload, time.Now(), "d1e2")
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/webhooks/github", bytes.NewReader(payload))
	req.Header = h
	req.Header.Set("Content-Type", "application/json")
	if _, err := github.ValidatePayload(req, []byte(oldSecret)); err != nil {
		t.Fatalf("go-github ValidatePayload: %v", err)
	}
}

// TestDiscordAgainstDiscordGo checks discord against discordgo's
// VerifyInteraction (Discord's Go library) both ways, with a rotated key.
func TestDiscordAgainstDiscordGo(t *testing.T) {
	t.Parallel()
	seed := func(b byte) ed25519.PrivateKey {
		return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{b}, ed25519.SeedSize))
	}
	oldKey, newKey, otherKey := seed(1), seed(2), seed(3)
	pubHex := func(k ed25519.PrivateKey) string { return hex.EncodeToString(k.Public().(ed25519.PublicKey)) }
	cfg := verify.Config{Scheme: verify.SchemeDiscord, Secrets: []string{pubHex(oldKey), pubHex(newKey)}}
	v, err := verify.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"type":2,"id":"786008729715212338","data":{"name":"ping"}}`)
	now := time.Unix(1_700_000_000, 0)
	signed := func(k ed25519.PrivateKey, at time.Time) http.Header {
		ts := strconv.FormatInt(at.Unix(), 10)
		h := http.Header{}
		h.Set("X-Signature-Timestamp", ts)
		h.Set("X-Signature-Ed25519", hex.EncodeToString(ed25519.Sign(k, append([]byte(ts), body...))))
		return h
	}
	for _, tc := range []struct {
		name      string
		key       ed25519.PrivateKey
		at        time.Time
		expectErr error
	}{
		{"current key", oldKey, now, nil},
		{"rotated key", newKey, now, nil},
		{"other key", otherKey, now, verify.ErrSignatureMismatch},
		{"stale", oldKey, now.Add(-6 * time.Minute), verify.ErrTimestampOutsideTolerance},
		{"future", oldKey, now.Add(6 * time.Minute), verify.ErrTimestampOutsideTolerance},
	} {
		h := signed(tc.key, tc.at)
		req, _ := http.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		req.Header = h
		if !discordgo.VerifyInteraction(req, tc.key.Public().(ed25519.PublicKey)) {
			t.Fatalf("%s: discordgo rejects the test's own signature", tc.name)
		}
		if err := v.Verify(verify.Request{Header: h, Body: body}, now); !errors.Is(err, tc.expectErr) {
			t.Errorf("%s: Verify = %v, want %v", tc.name, err, tc.expectErr)
		}
	}
	if err := v.Verify(verify.Request{Header: signed(oldKey, now), Body: append([]byte(" "), body...)}, now); !errors.Is(err, verify.ErrSignatureMismatch) {
		t.Errorf("altered body: Verify = %v", err)
	}

	// discordgo accepts what Sign produces with the private key.
	cfg.SigningKey = hex.EncodeToString(oldKey.Seed())
	h, _, err := verify.Sign(cfg, body, time.Now(), "")
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	req.Header = h
	if !discordgo.VerifyInteraction(req, oldKey.Public().(ed25519.PublicKey)) {
		t.Fatal("discordgo rejects Sign")
	}
	cfg.SigningKey = ""
	if _, _, err := verify.Sign(cfg, body, time.Now(), ""); err == nil {
		t.Fatal("Sign without a signing key succeeded")
	}
}

// SendGrid's published test vector (sendgrid-go,
// helpers/eventwebhook/eventwebhook_test.go): its public key, timestamp,
// payload and signature, and its private key for Sign.
const (
	sendgridVectorPublicKey  = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA=="
	sendgridVectorPrivateKey = "MHcCAQEEIEQmZgBEh9DcU9zMl34czK3xov4AYvm9P3r7rNB2dNXtoAoGCCqGSM49AwEHoUQDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA=="
	sendgridVectorTimestamp  = "1588788367"
	sendgridVectorSignature  = "MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nlxFDWYNH2j/0="
	sendgridVectorPayload    = `{"category":"example_payload","event":"test_event","message_id":"message_id"}`
)

func TestSendGridPublishedVector(t *testing.T) {
	t.Parallel()
	// A rotated-out key first: any configured key may match.
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	otherDER, _ := x509.MarshalPKIXPublicKey(&other.PublicKey)
	cfg := verify.Config{Scheme: verify.SchemeSendGrid, Secrets: []string{base64.StdEncoding.EncodeToString(otherDER), sendgridVectorPublicKey}}
	v, err := verify.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts, _ := strconv.ParseInt(sendgridVectorTimestamp, 10, 64)
	at := time.Unix(ts, 0)
	req := func(sig, body string) verify.Request {
		h := http.Header{}
		h.Set("X-Twilio-Email-Event-Webhook-Signature", sig)
		h.Set("X-Twilio-Email-Event-Webhook-Timestamp", sendgridVectorTimestamp)
		return verify.Request{Header: h, Body: []byte(body)}
	}
	for _, tc := range []struct {
		name      string
		r         verify.Request
		now       time.Time
		expectErr error
	}{
		{"published vector", req(sendgridVectorSignature, sendgridVectorPayload), at, nil},
		{"altered body", req(sendgridVectorSignature, sendgridVectorPayload+" "), at, verify.ErrSignatureMismatch},
		{"stale", req(sendgridVectorSignature, sendgridVectorPayload), at.Add(6 * time.Minute), verify.ErrTimestampOutsideTolerance},
		{"future", req(sendgridVectorSignature, sendgridVectorPayload), at.Add(-6 * time.Minute), verify.ErrTimestampOutsideTolerance},
		{"not base64", req("%%%", sendgridVectorPayload), at, verify.ErrMalformedSignature},
		{"not DER", req(base64.StdEncoding.EncodeToString([]byte("0123456789")), sendgridVectorPayload), at, verify.ErrSignatureMismatch},
	} {
		if err := v.Verify(tc.r, tc.now); !errors.Is(err, tc.expectErr) {
			t.Errorf("%s: Verify = %v, want %v", tc.name, err, tc.expectErr)
		}
	}
	if _, err := verify.New(verify.Config{Scheme: verify.SchemeSendGrid, Secrets: []string{sendgridVectorPublicKey}}); err != nil {
		t.Fatal(err)
	}
	// Sign with the vector's private key verifies under its public key
	// only (ECDSA signatures are randomized: no fixed expected value).
	cfg.SigningKey = sendgridVectorPrivateKey
	h, _, err := verify.Sign(cfg, []byte(sendgridVectorPayload), at, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(verify.Request{Header: h, Body: []byte(sendgridVectorPayload)}, at); err != nil {
		t.Fatalf("Sign does not verify: %v", err)
	}
	only, _ := verify.New(verify.Config{Scheme: verify.SchemeSendGrid, Secrets: []string{base64.StdEncoding.EncodeToString(otherDER)}})
	if err := only.Verify(verify.Request{Header: h, Body: []byte(sendgridVectorPayload)}, at); !errors.Is(err, verify.ErrSignatureMismatch) {
		t.Fatalf("Sign verifies under another key: %v", err)
	}
}

// TestSquarePublishedVectors checks square against the test vectors of
// Square's Go SDK (square-go-sdk, webhooks/client/verify_signature_test.go).
func TestSquarePublishedVectors(t *testing.T) {
	t.Parallel()
	const body = `{"merchant_id":"MLEFBHHSJGVHD","type":"webhooks.test_notification","event_id":"ac3ac95b-f97d-458c-a6e6-18981597e05f","created_at":"2022-07-13T20:30:59.037339943Z","data":{"type":"webhooks","id":"bc368e64-01aa-407e-b46e-3231809b1129"}}`
	for _, tc := range []struct {
		name, url, key, body, sig string
		expectErr                 error
	}{
		{"valid", "https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9", "Ibxx_5AKakO-3qeNVR61Dw", body, "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4=", nil},
		{"unescaped chars", "https://webhook.site/webhooks", "signature-key", `{"data":{"type":"webhooks","id":"fake_id"}}`, "W3FlCNk5IA3ZQ2LHTWoajvzfaDu/OwY2tNHIHC3IUOA=", nil},
		{"escaped chars", "https://webhook.site/webhooks", "signature-key", `{"data":{"type":"webhooks","id":">id<"}}`, "Cxt7+aTi4rKgcA0bC4g9EHdVtLSDWdqccmL5MvihU4U=", nil},
		{"URL mismatch", "https://webhook.site/79a4f3a-dcfa-49ee-bac5-9d0edad886b9", "Ibxx_5AKakO-3qeNVR61Dw", body, "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4=", verify.ErrSignatureMismatch},
		{"other key", "https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9", "MCmhFRxGX82xMwg5FsaoQA", body, "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4=", verify.ErrSignatureMismatch},
		{"SHA-1 sized signature", "https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9", "Ibxx_5AKakO-3qeNVR61Dw", body, "1z2n3DEJJiUPKcPzQo1ftvbxGdw=", verify.ErrMalformedSignature},
	} {
		cfg := verify.Config{Scheme: verify.SchemeSquare, Secrets: []string{"rotated-out-key", tc.key}, PublicURL: tc.url}
		v, err := verify.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		h.Set("x-square-hmacsha256-signature", tc.sig)
		if err := v.Verify(verify.Request{Header: h, Body: []byte(tc.body)}, time.Now()); !errors.Is(err, tc.expectErr) {
			t.Errorf("%s: Verify = %v, want %v", tc.name, err, tc.expectErr)
		}
		if tc.expectErr == nil {
			cfg.Secrets = []string{tc.key}
			sh, _, err := verify.Sign(cfg, []byte(tc.body), time.Now(), "")
			if err != nil || sh.Get("x-square-hmacsha256-signature") != tc.sig {
				t.Errorf("%s: Sign = %v %v, want %s", tc.name, sh, err, tc.sig)
			}
		}
	}
}

// adyenVectorKey and adyenVectorItem are the published test vector of
// Adyen's Go library (src/hmacvalidator/hmacvalidator_test.go), whose
// signature is ipnxGCaUZ4l8TUW75a71/ghd2Fe5ffvX0pV4TLTntIc=.
const adyenVectorKey = "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00"

func adyenVectorItem(sig string) string {
	return `{"NotificationRequestItem":{"additionalData":{"hmacSignature":"` + sig + `"},"amount":{"currency":"EUR","value":1000},` +
		`"eventCode":"EVENT","eventDate":"1970-01-01T00:00:00Z","merchantAccountCode":"merchantAccount","merchantReference":"reference",` +
		`"originalReference":"originalReference","paymentMethod":"VISA","pspReference":"pspReference","reason":"reason","success":"true"}}`
}

func TestAdyenPublishedVector(t *testing.T) {
	t.Parallel()
	const sig = "ipnxGCaUZ4l8TUW75a71/ghd2Fe5ffvX0pV4TLTntIc="
	batch := func(items ...string) []byte {
		return []byte(`{"live":"false","notificationItems":[` + strings.Join(items, ",") + `]}`)
	}
	v, err := verify.New(verify.Config{Scheme: verify.SchemeAdyen, Secrets: []string{"00112233", adyenVectorKey}})
	if err != nil {
		t.Fatal(err)
	}
	twoItems, err := verify.AdyenSignBody(batch(adyenVectorItem(sig), strings.Replace(adyenVectorItem(sig), `"pspReference":"pspReference"`, `"pspReference":"other"`, 1)), adyenVectorKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		body      []byte
		expectErr error
	}{
		{"published vector, rotated key", batch(adyenVectorItem(sig)), nil},
		{"two signed items", twoItems, nil},
		{"one signed item twice", batch(adyenVectorItem(sig), adyenVectorItem(sig)), verify.ErrMalformedSignature},
		{"second item forged", batch(adyenVectorItem(sig), adyenVectorItem("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")), verify.ErrSignatureMismatch},
		{"altered amount", bytes.Replace(batch(adyenVectorItem(sig)), []byte(`"value":1000`), []byte(`"value":9000`), 1), verify.ErrSignatureMismatch},
		{"no signature", batch(`{"NotificationRequestItem":{"pspReference":"p"}}`), verify.ErrMissingSignature},
		{"not base64", batch(adyenVectorItem("!!")), verify.ErrMalformedSignature},
		{"no items", []byte(`{"live":"false","notificationItems":[]}`), verify.ErrMalformedSignature},
		{"not JSON", []byte(`[accepted]`), verify.ErrMalformedSignature},
	} {
		if err := v.Verify(verify.Request{Body: tc.body}, time.Now()); !errors.Is(err, tc.expectErr) || tc.expectErr == nil && err != nil {
			t.Errorf("%s: Verify = %v, want %v", tc.name, err, tc.expectErr)
		}
	}
	only, _ := verify.New(verify.Config{Scheme: verify.SchemeAdyen, Secrets: []string{"00112233"}})
	if err := only.Verify(verify.Request{Body: batch(adyenVectorItem(sig))}, time.Now()); !errors.Is(err, verify.ErrSignatureMismatch) {
		t.Errorf("other key: Verify = %v", err)
	}
	if err := (verify.Config{Scheme: verify.SchemeAdyen, Secrets: []string{"not hex"}}).Validate(); err == nil || !strings.HasPrefix(err.Error(), "verify.secrets[0]") {
		t.Errorf("non-hex key: Validate = %v", err)
	}
}

// TestAdyenCanonicalForm: an item verifies only in the form its signed
// string stands for (issue 23, M2). Before, amount.value 1000.99 and
// "1000" verified under a signature for 1000 (gjson's Int truncates and
// reads strings), and of a repeated or otherwise-spelled key the first
// was checked while encoding/json and JavaScript read the last. Copies
// that differ only in whitespace or unsigned fields still verify, and
// carry the same signed content (what the content guard compares).
func TestAdyenCanonicalForm(t *testing.T) {
	t.Parallel()
	const sig = "ipnxGCaUZ4l8TUW75a71/ghd2Fe5ffvX0pV4TLTntIc="
	body := `{"live":"false","notificationItems":[` + adyenVectorItem(sig) + `]}`
	v, err := verify.New(verify.Config{Scheme: verify.SchemeAdyen, Secrets: []string{adyenVectorKey}})
	if err != nil {
		t.Fatal(err)
	}
	digest := func(b string) []byte { return verify.SignedDigest(v, verify.Request{Body: []byte(b)}) }
	if err := v.Verify(verify.Request{Body: []byte(body)}, time.Now()); err != nil {
		t.Fatalf("published vector: %v", err)
	}
	for _, tc := range []struct {
		name       string
		old, new   string
		expectSame bool // verifies, with the same signed content
	}{
		{"fraction", `"value":1000`, `"value":1000.99`, false},
		{"fraction zero", `"value":1000`, `"value":1000.0`, false},
		{"exponent", `"value":1000`, `"value":1e3`, false},
		{"leading zero", `"value":1000`, `"value":01000`, false},
		{"numeric string", `"value":1000`, `"value":"1000"`, false},
		{"null value", `"value":1000`, `"value":null`, false},
		{"repeated value", `"value":1000`, `"value":1000,"value":1`, false},
		{"repeated pspReference", `"pspReference":"pspReference"`, `"pspReference":"pspReference","pspReference":"other"`, false},
		{"pspReference in other case", `"pspReference":"pspReference"`, `"pspReference":"pspReference","PSPReference":"other"`, false},
		{"escaped key", `"pspReference":"pspReference"`, `"pspReference":"pspReference","psp\u0052eference":"other"`, false},
		{"success as a boolean", `"success":"true"`, `"success":true`, false},
		{"pspReference as a number", `"pspReference":"pspReference"`, `"pspReference":1`, false},
		{"repeated amount", `"amount":{`, `"amount":{"value":9},"amount":{`, false},
		{"repeated item key", `{"NotificationRequestItem":{`, `{"NotificationRequestItem":{},"NotificationRequestItem":{`, false},
		{"repeated items", `"notificationItems":[`, `"notificationItems":[],"notificationItems":[`, false},
		{"whitespace", `"amount":{`, "\n  \"amount\" : {", true},
		{"unsigned field", `"reason":"reason"`, `"reason":"refund #7"`, true},
		{"unsigned field added", `"live":"false"`, `"live":"false","extra":1`, true},
	} {
		b := strings.Replace(body, tc.old, tc.new, 1)
		if b == body {
			t.Fatalf("%s: %q not in the body", tc.name, tc.old)
		}
		err := v.Verify(verify.Request{Body: []byte(b)}, time.Now())
		switch {
		case tc.expectSame && err != nil:
			t.Errorf("%s: Verify = %v, want nil", tc.name, err)
		case tc.expectSame && !bytes.Equal(digest(b), digest(body)):
			t.Errorf("%s: signed content differs from the original's", tc.name)
		case !tc.expectSame && !errors.Is(err, verify.ErrMalformedSignature):
			t.Errorf("%s: Verify = %v, want %v", tc.name, err, verify.ErrMalformedSignature)
		}
	}
}
