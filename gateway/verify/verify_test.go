package verify

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

var testNow = time.Unix(1_700_000_000, 0)

func ptr(s string) *string { return &s }

// fixture describes one scheme configuration under test: two secrets (the
// second is the one rotated in), a body, the headers that are required and
// header values that must be rejected as malformed.
type fixture struct {
	name        string
	cfg         Config
	wrongSecret string
	body        []byte
	timestamped bool
	// tsHeader names where the signed timestamp lives ("" for stripe,
	// where it is inside Stripe-Signature).
	tsHeader  string
	required  []string
	sigHeader string
	malformed []string
}

func fixtures() []fixture {
	jsonBody := []byte(`{"id":"evt_1","type":"invoice.paid","data":{"object":{"id":"in_1","amount":1200}}}`)
	formBody := []byte("AccountSid=AC123&Body=hello+world&From=%2B14158675309&MessageSid=SM1&To=%2B18005551212")
	return []fixture{
		{
			name:        "stripe",
			cfg:         Config{Scheme: SchemeStripe, Secrets: []string{"whsec_old_stripe_secret", "whsec_new_stripe_secret"}},
			wrongSecret: "whsec_wrong",
			body:        jsonBody,
			timestamped: true,
			required:    []string{"Stripe-Signature"},
			sigHeader:   "Stripe-Signature",
			malformed: []string{
				"garbage", "v1=" + strings.Repeat("a", 64), "t=abc,v1=" + strings.Repeat("a", 64),
				"t=1,t=2,v1=aa", "t=,v1=aa", ",", "t=1700000000,", "=x,t=1700000000,v1=aa",
				"t=1700000000,v0=" + strings.Repeat("a", 64), "t=-5,v1=aa", "t=+5,v1=aa",
			},
		},
		{
			name:        "github",
			cfg:         Config{Scheme: SchemeGitHub, Secrets: []string{"gh-old", "gh-new"}},
			wrongSecret: "gh-wrong",
			body:        jsonBody,
			required:    []string{"X-Hub-Signature-256"},
			sigHeader:   "X-Hub-Signature-256",
			malformed: []string{
				"sha1=" + strings.Repeat("a", 40), strings.Repeat("a", 64), "sha256=" + strings.Repeat("z", 64),
				"sha256=" + strings.Repeat("a", 63), "sha256=", "SHA256=" + strings.Repeat("a", 64),
			},
		},
		{
			name: "standard",
			cfg: Config{Scheme: SchemeStandard, Secrets: []string{
				"whsec_" + base64.StdEncoding.EncodeToString([]byte("standard-old-secret-0123456789")),
				"whsec_" + base64.StdEncoding.EncodeToString([]byte("standard-new-secret-0123456789")),
			}},
			wrongSecret: "whsec_" + base64.StdEncoding.EncodeToString([]byte("standard-wrong-secret")),
			body:        jsonBody,
			timestamped: true,
			tsHeader:    "Webhook-Timestamp",
			required:    []string{"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"},
			sigHeader:   "Webhook-Signature",
			malformed:   []string{"v1", "v1,", ",abc", "   ", "v1=abc"},
		},
		{
			name:        "shopify",
			cfg:         Config{Scheme: SchemeShopify, Secrets: []string{"shpss_old", "shpss_new"}},
			wrongSecret: "shpss_wrong",
			body:        jsonBody,
			required:    []string{"X-Shopify-Hmac-Sha256"},
			sigHeader:   "X-Shopify-Hmac-Sha256",
			malformed: []string{
				"not base64!", strings.Repeat("a", 64), base64.StdEncoding.EncodeToString([]byte("short")),
				"sha256=" + base64.StdEncoding.EncodeToString(make([]byte, 32)),
			},
		},
		{
			name:        "slack",
			cfg:         Config{Scheme: SchemeSlack, Secrets: []string{"slack-old", "slack-new"}},
			wrongSecret: "slack-wrong",
			body:        []byte(`{"token":"t","team_id":"T1","type":"event_callback","event_id":"Ev1","event":{"type":"app_mention"}}`),
			timestamped: true,
			tsHeader:    "X-Slack-Request-Timestamp",
			required:    []string{"X-Slack-Signature", "X-Slack-Request-Timestamp"},
			sigHeader:   "X-Slack-Signature",
			malformed:   []string{"v1=" + strings.Repeat("a", 64), strings.Repeat("a", 64), "v0=xyz", "v0="},
		},
		{
			name:        "twilio-form",
			cfg:         Config{Scheme: SchemeTwilio, Secrets: []string{"twilio-old-token", "twilio-new-token"}, PublicURL: "https://hooks.example.com/webhooks/twilio"},
			wrongSecret: "twilio-wrong",
			body:        formBody,
			required:    []string{"X-Twilio-Signature"},
			sigHeader:   "X-Twilio-Signature",
			malformed:   []string{"not base64!", base64.StdEncoding.EncodeToString(make([]byte, 32)), "abc"},
		},
		{
			name:        "twilio-json",
			cfg:         Config{Scheme: SchemeTwilio, Secrets: []string{"twilio-old-token", "twilio-new-token"}, PublicURL: "https://hooks.example.com/webhooks/twilio?source=sms"},
			wrongSecret: "twilio-wrong",
			body:        jsonBody,
			required:    []string{"X-Twilio-Signature"},
			sigHeader:   "X-Twilio-Signature",
			malformed:   []string{"not base64!"},
		},
		{
			name:        "hmac-sha256",
			cfg:         Config{Scheme: SchemeHMACSHA256, Secrets: []string{"generic-old", "generic-new"}},
			wrongSecret: "generic-wrong",
			body:        jsonBody,
			required:    []string{"X-Webhook-Signature"},
			sigHeader:   "X-Webhook-Signature",
			malformed:   []string{strings.Repeat("a", 64), "sha256=zz", "sha256=" + strings.Repeat("A", 63)},
		},
		{
			name: "hmac-sha256-base64-timestamp",
			cfg: Config{
				Scheme: SchemeHMACSHA256, Secrets: []string{"generic-old", "generic-new"},
				Header: "X-Signature", Encoding: "base64", Prefix: ptr(""),
				TimestampHeader: "X-Timestamp", SignedContent: "v1:{timestamp}:{body}",
			},
			wrongSecret: "generic-wrong",
			body:        jsonBody,
			timestamped: true,
			tsHeader:    "X-Timestamp",
			required:    []string{"X-Signature", "X-Timestamp"},
			sigHeader:   "X-Signature",
			malformed:   []string{"sha256=" + base64.StdEncoding.EncodeToString(make([]byte, 32)), "%%%"},
		},
	}
}

// signWith signs body with the i-th secret of f (or with secret when i<0)
// at time at, and returns the request a sender would make.
func (f fixture) signWith(t testing.TB, i int, secret string, body []byte, at time.Time) Request {
	t.Helper()
	c := f.cfg
	if i >= 0 {
		secret = c.Secrets[i]
	}
	c.Secrets = []string{secret}
	h, q, err := Sign(c, body, at, "msg_2Lx1")
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	return Request{Header: h, Body: body, RawQuery: q}
}

func (f fixture) verifier(t testing.TB) Verifier {
	t.Helper()
	v, err := New(f.cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return v
}

func TestVerifySchemes(t *testing.T) {
	t.Parallel()
	for _, f := range fixtures() {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			v := f.verifier(t)
			type tc struct {
				name      string
				givenReq  Request
				whenNow   time.Time
				expectErr error
			}
			tampered := append([]byte(nil), f.body...)
			tampered[len(tampered)/2] ^= 0x01
			cases := []tc{
				{"valid", f.signWith(t, 0, "", f.body, testNow), testNow, nil},
				{"rotated second secret", f.signWith(t, 1, "", f.body, testNow), testNow, nil},
				{"wrong secret", f.signWith(t, -1, f.wrongSecret, f.body, testNow), testNow, ErrSignatureMismatch},
				{"tampered body", withBody(f.signWith(t, 0, "", f.body, testNow), tampered), testNow, ErrSignatureMismatch},
				{"appended body", withBody(f.signWith(t, 0, "", f.body, testNow), append(append([]byte(nil), f.body...), ' ')), testNow, ErrSignatureMismatch},
				{"empty body", withBody(f.signWith(t, 0, "", f.body, testNow), nil), testNow, ErrSignatureMismatch},
			}
			if f.timestamped {
				cases = append(cases,
					tc{"stale", f.signWith(t, 0, "", f.body, testNow.Add(-5*time.Minute-time.Second)), testNow, ErrTimestampOutsideTolerance},
					tc{"future", f.signWith(t, 0, "", f.body, testNow.Add(5*time.Minute+time.Second)), testNow, ErrTimestampOutsideTolerance},
					tc{"at tolerance edge (old)", f.signWith(t, 0, "", f.body, testNow.Add(-5*time.Minute)), testNow, nil},
					tc{"at tolerance edge (future)", f.signWith(t, 0, "", f.body, testNow.Add(5*time.Minute)), testNow, nil},
					tc{"stale with wrong secret", f.signWith(t, -1, f.wrongSecret, f.body, testNow.Add(-time.Hour)), testNow, ErrTimestampOutsideTolerance},
				)
				if f.tsHeader != "" {
					r := f.signWith(t, 0, "", f.body, testNow)
					r.Header = r.Header.Clone()
					r.Header.Set(f.tsHeader, strconv.FormatInt(testNow.Unix()+1, 10))
					cases = append(cases, tc{"timestamp changed within tolerance", r, testNow, ErrSignatureMismatch})
					r2 := f.signWith(t, 0, "", f.body, testNow)
					r2.Header = r2.Header.Clone()
					r2.Header.Set(f.tsHeader, "yesterday")
					cases = append(cases, tc{"timestamp not a number", r2, testNow, ErrMalformedSignature})
				}
			} else {
				// No timestamp: an old signature stays valid; the event id catches replays.
				cases = append(cases, tc{"no timestamp scheme ignores clock", f.signWith(t, 0, "", f.body, testNow), testNow.Add(24 * time.Hour), nil})
			}
			for _, h := range f.required {
				r := f.signWith(t, 0, "", f.body, testNow)
				r.Header = r.Header.Clone()
				r.Header.Del(h)
				cases = append(cases, tc{"missing " + h, r, testNow, ErrMissingSignature})
			}
			cases = append(cases, tc{"no headers at all", Request{Header: http.Header{}, Body: f.body}, testNow, ErrMissingSignature})
			for _, m := range f.malformed {
				r := f.signWith(t, 0, "", f.body, testNow)
				r.Header = r.Header.Clone()
				r.Header.Set(f.sigHeader, m)
				cases = append(cases, tc{"malformed " + m, r, testNow, ErrMalformedSignature})
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					err := v.Verify(c.givenReq, c.whenNow)
					if c.expectErr == nil {
						if err != nil {
							t.Fatalf("Verify = %v, want nil", err)
						}
						return
					}
					if !errors.Is(err, c.expectErr) {
						t.Fatalf("Verify = %v, want %v", err, c.expectErr)
					}
					if h, ok := strings.CutPrefix(c.name, "missing "); ok && !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(h)) {
						t.Fatalf("Verify = %v, want it to name the missing %s", err, h)
					}
					assertNoSecretInError(t, f, c.givenReq, err)
				})
			}
		})
	}
}

func withBody(r Request, body []byte) Request {
	r.Body = body
	return r
}

// assertNoSecretInError checks that err reveals no secret and no signature.
func assertNoSecretInError(t *testing.T, f fixture, r Request, err error) {
	t.Helper()
	msg := err.Error()
	for _, s := range append(append([]string(nil), f.cfg.Secrets...), f.wrongSecret) {
		if strings.Contains(msg, s) {
			t.Fatalf("error %q contains a secret", msg)
		}
	}
	good := f.signWith(t, 0, "", f.body, testNow)
	for _, vals := range good.Header {
		for _, val := range vals {
			if len(val) >= 16 && strings.Contains(msg, val) {
				t.Fatalf("error %q contains a header value", msg)
			}
		}
	}
	for name := range r.Header {
		for _, val := range r.Header[name] {
			if len(val) >= 16 && strings.Contains(msg, val) {
				t.Fatalf("error %q echoes header %s", msg, name)
			}
		}
	}
}

func TestErrorsNameHeader(t *testing.T) {
	t.Parallel()
	for _, f := range fixtures() {
		err := f.verifier(t).Verify(Request{Header: http.Header{}, Body: f.body}, testNow)
		named := false
		for _, h := range f.required {
			named = named || strings.Contains(strings.ToLower(err.Error()), strings.ToLower(h))
		}
		if !named {
			t.Errorf("%s: error %q names none of %v", f.name, err, f.required)
		}
	}
}

func TestStripeHeaderVariants(t *testing.T) {
	t.Parallel()
	f := fixtures()[0]
	v := f.verifier(t)
	good := f.signWith(t, 0, "", f.body, testNow).Header.Get("Stripe-Signature")
	_, v1, _ := strings.Cut(good, ",v1=")
	ts := strconv.FormatInt(testNow.Unix(), 10)
	other := strings.Repeat("0", 64)
	for _, tc := range []struct {
		name, header string
		expectErr    error
	}{
		{"second v1 matches", "t=" + ts + ",v1=" + other + ",v1=" + v1, nil},
		{"first v1 matches", "t=" + ts + ",v1=" + v1 + ",v1=" + other, nil},
		{"v0 ignored", "t=" + ts + ",v1=" + v1 + ",v0=" + other, nil},
		{"order of items free", "v1=" + v1 + ",t=" + ts, nil},
		{"unknown scheme ignored", "t=" + ts + ",v9=zz,v1=" + v1, nil},
		{"upper-case hex", "t=" + ts + ",v1=" + strings.ToUpper(v1), nil},
		{"only wrong v1", "t=" + ts + ",v1=" + other, ErrSignatureMismatch},
		{"v1 not hex", "t=" + ts + ",v1=xyz", ErrSignatureMismatch},
		{"v1 as v0 only", "t=" + ts + ",v0=" + v1, ErrMalformedSignature},
		{"signature for other timestamp", "t=" + strconv.FormatInt(testNow.Unix()-1, 10) + ",v1=" + v1, ErrSignatureMismatch},
	} {
		h := http.Header{}
		h.Set("Stripe-Signature", tc.header)
		err := v.Verify(Request{Header: h, Body: f.body}, testNow)
		if !errors.Is(err, tc.expectErr) {
			t.Errorf("%s: Verify = %v, want %v", tc.name, err, tc.expectErr)
		}
	}
}

func TestStandardHeaderVariants(t *testing.T) {
	t.Parallel()
	f := fixtures()[2]
	v := f.verifier(t)
	r := f.signWith(t, 0, "", f.body, testNow)
	good := r.Header.Get("Webhook-Signature")
	other := "v1," + base64.StdEncoding.EncodeToString(make([]byte, 32))
	for _, tc := range []struct {
		name, sig string
		expectErr error
	}{
		{"several signatures, last matches", other + " v1a,abc " + good, nil},
		{"several signatures, first matches", good + " " + other, nil},
		{"double space", other + "  " + good, nil},
		{"only asymmetric v1a", "v1a," + strings.TrimPrefix(good, "v1,"), ErrSignatureMismatch},
		{"v2 ignored", "v2," + strings.TrimPrefix(good, "v1,"), ErrSignatureMismatch},
		{"wrong v1", other, ErrSignatureMismatch},
		{"truncated base64", good[:len(good)-2], ErrSignatureMismatch},
	} {
		h := r.Header.Clone()
		h.Set("Webhook-Signature", tc.sig)
		if err := v.Verify(Request{Header: h, Body: f.body}, testNow); !errors.Is(err, tc.expectErr) {
			t.Errorf("%s: Verify = %v, want %v", tc.name, err, tc.expectErr)
		}
	}

	// Svix sends the same scheme under svix-* names.
	svix := http.Header{}
	svix.Set("svix-id", r.Header.Get("Webhook-Id"))
	svix.Set("svix-timestamp", r.Header.Get("Webhook-Timestamp"))
	svix.Set("svix-signature", good)
	if err := v.Verify(Request{Header: svix, Body: f.body}, testNow); err != nil {
		t.Fatalf("svix headers: %v", err)
	}
	svix.Del("svix-id")
	if err := v.Verify(Request{Header: svix, Body: f.body}, testNow); !errors.Is(err, ErrMissingSignature) || !strings.Contains(err.Error(), "svix-id") {
		t.Fatalf("svix without id: %v", err)
	}
	// The id is signed: another id with the same signature fails.
	h := r.Header.Clone()
	h.Set("Webhook-Id", "msg_other")
	if err := v.Verify(Request{Header: h, Body: f.body}, testNow); !errors.Is(err, ErrSignatureMismatch) {
		t.Fatalf("changed id: %v", err)
	}
}

// Slack's documented example
// (api.slack.com/authentication/verifying-requests-from-slack).
const (
	slackDocSecret    = "8f742231b10e8888abcd99yyyzzz85a5"
	slackDocTimestamp = 1531420618
	slackDocBody      = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
	slackDocSignature = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
)

func TestSlackDocumentationVector(t *testing.T) {
	t.Parallel()
	v, err := New(Config{Scheme: SchemeSlack, Secrets: []string{"rotated-out", slackDocSecret}})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("X-Slack-Signature", slackDocSignature)
	h.Set("X-Slack-Request-Timestamp", strconv.Itoa(slackDocTimestamp))
	at := time.Unix(slackDocTimestamp, 0)
	if err := v.Verify(Request{Header: h, Body: []byte(slackDocBody)}, at.Add(time.Minute)); err != nil {
		t.Fatalf("docs vector: %v", err)
	}
	if err := v.Verify(Request{Header: h, Body: []byte(slackDocBody)}, at.Add(10*time.Minute)); !errors.Is(err, ErrTimestampOutsideTolerance) {
		t.Fatalf("docs vector 10m later: %v", err)
	}
	sh, _, err := Sign(Config{Scheme: SchemeSlack, Secrets: []string{slackDocSecret}}, []byte(slackDocBody), at, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := sh.Get("X-Slack-Signature"); got != slackDocSignature {
		t.Fatalf("Sign = %s, want the documented %s", got, slackDocSignature)
	}
}

func TestSlackChallengeParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body, expect string
		ok           bool
	}{
		{`{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`, "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", true},
		{`{"type":"event_callback","challenge":"x"}`, "", false},
		{`{"type":"url_verification"}`, "", false},
		{`{"type":"url_verification","challenge":""}`, "", false},
		{`{"type":"url_verification","challenge":42}`, "", false},
		{`{"type":"url_verification","challenge":"x"`, "", false},
		{`token=abc&challenge=x&type=url_verification`, "", false},
		{``, "", false},
	} {
		got, ok := slackChallenge([]byte(tc.body))
		if got != tc.expect || ok != tc.ok {
			t.Errorf("slackChallenge(%s) = %q, %v; want %q, %v", tc.body, got, ok, tc.expect, tc.ok)
		}
	}
}

// GitHub's documented example (docs.github.com, "Validating webhook
// deliveries": secret "It's a Secret to Everybody", payload "Hello, World!").
func TestGitHubDocumentationVector(t *testing.T) {
	t.Parallel()
	const sig = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	v, err := New(Config{Scheme: SchemeGitHub, Secrets: []string{"It's a Secret to Everybody"}})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("X-Hub-Signature-256", sig)
	if err := v.Verify(Request{Header: h, Body: []byte("Hello, World!")}, testNow); err != nil {
		t.Fatalf("docs vector: %v", err)
	}
	if err := v.Verify(Request{Header: h, Body: []byte("Hello, World?")}, testNow); !errors.Is(err, ErrSignatureMismatch) {
		t.Fatalf("tampered docs vector: %v", err)
	}
}

// Shopify documents the algorithm but publishes no worked example; this
// vector was computed with OpenSSL (an independent implementation):
// printf '%s' BODY | openssl dgst -sha256 -hmac hush -binary | base64.
func TestShopifyOpenSSLVector(t *testing.T) {
	t.Parallel()
	v, err := New(Config{Scheme: SchemeShopify, Secrets: []string{"hush"}})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("X-Shopify-Hmac-Sha256", "fp5HwmAHEVGQQwJU1KRpk57Ts2YHF6/TLOCczCtB5bs=")
	if err := v.Verify(Request{Header: h, Body: []byte(`{"id":820982911946154508,"email":"jon@doe.ca"}`)}, testNow); err != nil {
		t.Fatalf("openssl vector: %v", err)
	}
}

// Generic hmac-sha256 vectors computed with OpenSSL.
func TestGenericOpenSSLVectors(t *testing.T) {
	t.Parallel()
	body := []byte(`{"event":"ping"}`)
	hexCfg := Config{Scheme: SchemeHMACSHA256, Secrets: []string{"generic-secret"}}
	h := http.Header{}
	h.Set("X-Webhook-Signature", "sha256=adbb938347115a1b87cab58c7bc6980054aec92d3d79c686a74f97cd58a14cfd")
	v, err := New(hexCfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(Request{Header: h, Body: body}, testNow); err != nil {
		t.Fatalf("hex vector: %v", err)
	}
	tsCfg := Config{Scheme: SchemeHMACSHA256, Secrets: []string{"generic-secret"}, Encoding: "base64", Prefix: ptr(""), TimestampHeader: "X-Webhook-Timestamp"}
	h = http.Header{}
	h.Set("X-Webhook-Signature", "6SQKgW52/f+5+S9uiwBs2oDBrOKQSgqHvAQLh4qx55A=")
	h.Set("X-Webhook-Timestamp", "1700000000")
	v, err = New(tsCfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(Request{Header: h, Body: body}, testNow); err != nil {
		t.Fatalf("timestamp vector: %v", err)
	}
}

// Twilio vectors from Twilio's own Go library tests
// (twilio-go client/request_validator_test.go, auth token "12345").
const (
	twilioDocToken    = "12345"
	twilioDocURL      = "https://mycompany.com/myapp.php?foo=1&bar=2"
	twilioLibBodyHash = "0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620"
)

func twilioDocForm() []byte {
	return []byte(url.Values{
		"Digits":  {"1234"},
		"CallSid": {"CA1234567890ABCDE"},
		"To":      {"+18005551212"},
		"Caller":  {"+14158675309"},
		"From":    {"+14158675309"},
	}.Encode())
}

func TestTwilioLibraryVectors(t *testing.T) {
	t.Parallel()
	jsonBody := []byte(`{"property": "value", "boolean": true}`)
	for _, tc := range []struct {
		name      string
		publicURL string
		rawQuery  string
		sig       string
		body      []byte
		expectErr error
	}{
		{"form with query in public url", twilioDocURL, "", "RSOYDt4T1cUTdK1PDd93/VVr8B8=", twilioDocForm(), nil},
		{"form with query from request", "https://mycompany.com/myapp.php", "foo=1&bar=2", "RSOYDt4T1cUTdK1PDd93/VVr8B8=", twilioDocForm(), nil},
		{"signature made with :443", twilioDocURL, "", "kvajT1Ptam85bY51eRf/AJRuM3w=", twilioDocForm(), nil},
		{"public url with :443, signature without", "https://mycompany.com:443/myapp.php?foo=1&bar=2", "", "RSOYDt4T1cUTdK1PDd93/VVr8B8=", twilioDocForm(), nil},
		{"http signature", "http://mycompany.com/myapp.php?foo=1&bar=2", "", "0ZXoZLH/DfblKGATFgpif+LLRf4=", twilioDocForm(), nil},
		{"http with port 1234", "http://mycompany.com:1234/myapp.php?foo=1&bar=2", "", "Zmvh+3yNM1Phv2jhDCwEM3q5ebU=", twilioDocForm(), nil},
		{"json body via bodySHA256", "https://mycompany.com/myapp.php", "foo=1&bar=2&bodySHA256=" + twilioLibBodyHash, "a9nBmqA0ju/hNViExpshrM61xv4=", jsonBody, nil},
		{"json body, only bodySHA256", "https://mycompany.com/myapp.php", "bodySHA256=" + twilioLibBodyHash, "y77kIzt2vzLz71DgmJGsen2scGs=", jsonBody, nil},
		{"json body tampered", "https://mycompany.com/myapp.php", "bodySHA256=" + twilioLibBodyHash, "y77kIzt2vzLz71DgmJGsen2scGs=", []byte(`{"property": "value", "boolean": false}`), ErrSignatureMismatch},
		{"form param tampered", twilioDocURL, "", "RSOYDt4T1cUTdK1PDd93/VVr8B8=", []byte(strings.Replace(string(twilioDocForm()), "1234", "1235", 1)), ErrSignatureMismatch},
		{"form param added", twilioDocURL, "", "RSOYDt4T1cUTdK1PDd93/VVr8B8=", append(twilioDocForm(), "&Extra=1"...), ErrSignatureMismatch},
		{"other path", "https://mycompany.com/other.php?foo=1&bar=2", "", "RSOYDt4T1cUTdK1PDd93/VVr8B8=", twilioDocForm(), ErrSignatureMismatch},
		{"query changed", "https://mycompany.com/myapp.php", "foo=1&bar=3", "RSOYDt4T1cUTdK1PDd93/VVr8B8=", twilioDocForm(), ErrSignatureMismatch},
		{"bodySHA256 not hex", "https://mycompany.com/myapp.php", "bodySHA256=xyz", "y77kIzt2vzLz71DgmJGsen2scGs=", jsonBody, ErrSignatureMismatch},
	} {
		v, err := New(Config{Scheme: SchemeTwilio, Secrets: []string{"old-token", twilioDocToken}, PublicURL: tc.publicURL})
		if err != nil {
			t.Fatalf("%s: New: %v", tc.name, err)
		}
		h := http.Header{}
		h.Set("X-Twilio-Signature", tc.sig)
		err = v.Verify(Request{Header: h, Body: tc.body, RawQuery: tc.rawQuery}, testNow)
		if !errors.Is(err, tc.expectErr) {
			t.Errorf("%s: Verify = %v, want %v", tc.name, err, tc.expectErr)
		}
	}
	// Sign reproduces the library's signatures.
	h, q, err := Sign(Config{Scheme: SchemeTwilio, Secrets: []string{twilioDocToken}, PublicURL: twilioDocURL}, twilioDocForm(), testNow, "")
	if err != nil || h.Get("X-Twilio-Signature") != "RSOYDt4T1cUTdK1PDd93/VVr8B8=" || q != "foo=1&bar=2" {
		t.Fatalf("Sign form = %v %q %v", h, q, err)
	}
	h, q, err = Sign(Config{Scheme: SchemeTwilio, Secrets: []string{twilioDocToken}, PublicURL: twilioDocURL}, jsonBody, testNow, "")
	if err != nil || h.Get("X-Twilio-Signature") != "a9nBmqA0ju/hNViExpshrM61xv4=" || q != "foo=1&bar=2&bodySHA256="+twilioLibBodyHash {
		t.Fatalf("Sign json = %v %q %v", h, q, err)
	}
}

func TestTwilioTogglePort(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://example.com/a":           "https://example.com:443/a",
		"https://example.com:443/a":       "https://example.com/a",
		"http://example.com":              "http://example.com:80",
		"http://u:p@example.com:8080/x/y": "http://u:p@example.com/x/y",
		"https://[::1]/hook":              "https://[::1]:443/hook",
		"https://[::1]:8443/hook":         "https://[::1]/hook",
	} {
		u, err := url.Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := togglePort(in, u); got != want {
			t.Errorf("togglePort(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestSlackSignedURLVerification(t *testing.T) {
	t.Parallel()
	cfg := Config{Scheme: SchemeSlack, Secrets: []string{"s"}}
	body := []byte(`{"token":"x","challenge":"abc123","type":"url_verification"}`)
	h, _, err := Sign(cfg, body, testNow, "")
	if err != nil {
		t.Fatal(err)
	}
	v, _ := New(cfg)
	if err := v.Verify(Request{Header: h, Body: body}, testNow); err != nil {
		t.Fatal(err)
	}
	a, ok, err := Handshake(v, Request{Header: h, Body: body}, testNow)
	if err != nil || !ok || string(a.Body) != `{"challenge":"abc123"}` || a.ContentType != "application/json" {
		t.Fatalf("Handshake = %+v %v %v", a, ok, err)
	}
}

func TestNone(t *testing.T) {
	t.Parallel()
	v, err := New(Config{Scheme: SchemeNone, AllowUnsigned: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(Request{Header: http.Header{}, Body: []byte("x")}, testNow); err != nil {
		t.Fatal(err)
	}
	h, q, err := Sign(Config{Scheme: SchemeNone, AllowUnsigned: true}, []byte("x"), testNow, "id")
	if err != nil || len(h) != 0 || q != "" {
		t.Fatalf("Sign none = %v %q %v", h, q, err)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	const secret = "super-secret-value"
	for _, tc := range []struct {
		name      string
		given     Config
		expectErr string // substring; "" means valid
	}{
		{"stripe ok", Config{Scheme: "stripe", Secrets: []string{secret}}, ""},
		{"no scheme", Config{Secrets: []string{secret}}, "verify.scheme: required"},
		{"unknown scheme", Config{Scheme: "paypal", Secrets: []string{secret}}, `verify.scheme: unknown scheme "paypal"`},
		{"no secrets", Config{Scheme: "stripe"}, "verify.secrets: required for scheme stripe"},
		{"empty secret", Config{Scheme: "github", Secrets: []string{secret, ""}}, "verify.secrets[1]: empty"},
		{"negative tolerance", Config{Scheme: "slack", Secrets: []string{secret}, Tolerance: -time.Second}, "verify.tolerance"},
		{"standard bad base64", Config{Scheme: "standard", Secrets: []string{"whsec_" + secret + "!"}}, "verify.secrets[0]: want whsec_<base64>"},
		{"standard ok", Config{Scheme: "standard", Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}, ""},
		{"standard without prefix ok", Config{Scheme: "standard", Secrets: []string{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}, ""},
		{"twilio needs url", Config{Scheme: "twilio", Secrets: []string{secret}}, "verify.public_url: required"},
		{"twilio relative url", Config{Scheme: "twilio", Secrets: []string{secret}, PublicURL: "/hooks"}, "verify.public_url: want an absolute"},
		{"twilio ftp url", Config{Scheme: "twilio", Secrets: []string{secret}, PublicURL: "ftp://x/y"}, "verify.public_url: want an absolute"},
		{"twilio fragment", Config{Scheme: "twilio", Secrets: []string{secret}, PublicURL: "https://x/y#z"}, "verify.public_url"},
		{"public_url on stripe", Config{Scheme: "stripe", Secrets: []string{secret}, PublicURL: "https://x"}, "verify.public_url: only used by schemes twilio, square"},
		{"header on github", Config{Scheme: "github", Secrets: []string{secret}, Header: "X-Sig"}, "verify.header: only used by scheme hmac-sha256"},
		{"prefix on github", Config{Scheme: "github", Secrets: []string{secret}, Prefix: ptr("")}, "verify.prefix: only used"},
		{"none without allow", Config{Scheme: "none"}, "verify.allow_unsigned: must be true for scheme none"},
		{"none with secrets", Config{Scheme: "none", AllowUnsigned: true, Secrets: []string{secret}}, "verify.secrets: not used by scheme none"},
		{"allow_unsigned on stripe", Config{Scheme: "stripe", Secrets: []string{secret}, AllowUnsigned: true}, "verify.allow_unsigned: only used by scheme none"},
		{"hmac bad encoding", Config{Scheme: "hmac-sha256", Secrets: []string{secret}, Encoding: "base32"}, "verify.encoding"},
		{"hmac bad header", Config{Scheme: "hmac-sha256", Secrets: []string{secret}, Header: "X Sig"}, "verify.header: not a valid header name"},
		{"hmac bad timestamp header", Config{Scheme: "hmac-sha256", Secrets: []string{secret}, TimestampHeader: "X:T"}, "verify.timestamp_header"},
		{"hmac template without body", Config{Scheme: "hmac-sha256", Secrets: []string{secret}, SignedContent: "abc"}, "verify.signed_content: must contain {body}"},
		{"hmac template twice body", Config{Scheme: "hmac-sha256", Secrets: []string{secret}, SignedContent: "{body}{body}"}, "verify.signed_content: must contain {body}"},
		{"hmac template timestamp without header", Config{Scheme: "hmac-sha256", Secrets: []string{secret}, SignedContent: "{timestamp}.{body}"}, "verify.signed_content: {timestamp} needs verify.timestamp_header"},
		{"hmac timestamp header not signed", Config{Scheme: "hmac-sha256", Secrets: []string{secret}, TimestampHeader: "X-T", SignedContent: "{body}"}, "verify.timestamp_header: the timestamp is not signed: verify.signed_content must contain {timestamp}"},
		{"hmac timestamp header signed by default", Config{Scheme: "hmac-sha256", Secrets: []string{secret}, TimestampHeader: "X-T"}, ""},
		{"hmac template typo", Config{Scheme: "hmac-sha256", Secrets: []string{secret}, TimestampHeader: "X-T", SignedContent: "{ts}.{body}"}, "verify.signed_content: unknown placeholder {ts}"},
		{"hmac template literal braces", Config{Scheme: "hmac-sha256", Secrets: []string{secret}, SignedContent: "{\"x\":1}{body}{}"}, ""},
		{"hmac ok", Config{Scheme: "hmac-sha256", Secrets: []string{secret}}, ""},
	} {
		err := tc.given.Validate()
		if tc.expectErr == "" {
			if err != nil {
				t.Errorf("%s: Validate = %v, want nil", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.expectErr) {
			t.Errorf("%s: Validate = %v, want it to contain %q", tc.name, err, tc.expectErr)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: error %q contains the secret", tc.name, err)
		}
		if _, err := New(tc.given); err == nil {
			t.Errorf("%s: New accepted an invalid config", tc.name)
		}
	}
}

func TestGenericTemplate(t *testing.T) {
	t.Parallel()
	segs, err := parseTemplate(`{"x":1}v1:{timestamp}:{body}{}`, true)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []segmentKind
	var lits []string
	for _, s := range segs {
		kinds = append(kinds, s.kind)
		lits = append(lits, string(s.lit))
	}
	want := []segmentKind{segLiteral, segTimestamp, segLiteral, segBody, segLiteral}
	if len(kinds) != len(want) {
		t.Fatalf("segments %v %q", kinds, lits)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("segments %v %q", kinds, lits)
		}
	}
	if lits[0] != `{"x":1}v1:` || lits[2] != ":" || lits[4] != "{}" {
		t.Fatalf("literals %q", lits)
	}
}

func TestSchemeDefaultEventID(t *testing.T) {
	t.Parallel()
	for scheme, want := range map[string]string{
		"stripe":      "json:id",
		"github":      "header:X-GitHub-Delivery",
		"standard":    "header:webhook-id",
		"shopify":     "header:X-Shopify-Event-Id",
		"slack":       "json:event_id",
		"twilio":      "header:I-Twilio-Idempotency-Token",
		"hmac-sha256": "",
		"none":        "",
		"bogus":       "",
	} {
		if got := SchemeDefaults(scheme).EventID; got != want {
			t.Errorf("SchemeDefaults(%s).EventID = %q, want %q", scheme, got, want)
		}
	}
}

func TestSignIDHeaders(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg    Config
		header string
	}{
		{Config{Scheme: SchemeGitHub, Secrets: []string{"s"}}, "X-GitHub-Delivery"},
		{Config{Scheme: SchemeStandard, Secrets: []string{"whsec_c2VjcmV0"}}, "webhook-id"},
		{Config{Scheme: SchemeShopify, Secrets: []string{"s"}}, "X-Shopify-Webhook-Id"},
		{Config{Scheme: SchemeShopify, Secrets: []string{"s"}}, "X-Shopify-Event-Id"},
		{Config{Scheme: SchemeTwilio, Secrets: []string{"s"}, PublicURL: "https://x/y"}, "I-Twilio-Idempotency-Token"},
	} {
		h, _, err := Sign(tc.cfg, []byte("{}"), testNow, "evt-42")
		if err != nil {
			t.Fatal(err)
		}
		if h.Get(tc.header) != "evt-42" {
			t.Errorf("%s: Sign did not set %s: %v", tc.cfg.Scheme, tc.header, h)
		}
	}
	if _, _, err := Sign(Config{Scheme: SchemeStandard, Secrets: []string{"whsec_c2VjcmV0"}}, []byte("{}"), testNow, ""); err == nil {
		t.Error("standard Sign without message id succeeded")
	}
	if _, _, err := Sign(Config{Scheme: SchemeStripe}, []byte("{}"), testNow, ""); err == nil {
		t.Error("Sign with invalid config succeeded")
	}
	if _, _, err := Sign(Config{Scheme: SchemeTwilio, Secrets: []string{"s"}, PublicURL: "https://x/y"}, []byte("a=%zz"), testNow, ""); err == nil {
		t.Error("twilio Sign of a body that is neither JSON nor form succeeded")
	}
}

// TestConcurrentVerify exercises the pooled HMAC state under -race.
func TestConcurrentVerify(t *testing.T) {
	t.Parallel()
	for _, f := range fixtures() {
		v := f.verifier(t)
		good := f.signWith(t, 1, "", f.body, testNow)
		bad := f.signWith(t, -1, f.wrongSecret, f.body, testNow)
		done := make(chan error, 8)
		for i := 0; i < 8; i++ {
			go func() {
				for j := 0; j < 50; j++ {
					if err := v.Verify(good, testNow); err != nil {
						done <- err
						return
					}
					if err := v.Verify(bad, testNow); !errors.Is(err, ErrSignatureMismatch) {
						done <- err
						return
					}
				}
				done <- nil
			}()
		}
		for i := 0; i < 8; i++ {
			if err := <-done; err != nil {
				t.Fatalf("%s: %v", f.name, err)
			}
		}
	}
}
