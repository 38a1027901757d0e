package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	stripewebhook "github.com/stripe/stripe-go/v82/webhook"

	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
)

// signer signs body as the sender would with cfg (one secret, as the
// pipeline configured it otherwise) at time at, with message id id. It
// returns the headers and the raw query to post with.
type signer func(t *testing.T, cfg verify.Config, body []byte, at time.Time, id string) (http.Header, string)

// signWithVerify is webhookd's own signer, verify.Sign.
func signWithVerify(t *testing.T, cfg verify.Config, body []byte, at time.Time, id string) (http.Header, string) {
	t.Helper()
	h, q, err := verify.Sign(cfg, body, at, id)
	if err != nil {
		t.Fatal(err)
	}
	return h, q
}

// signWithStripeGo signs with stripe-go, Stripe's own code.
func signWithStripeGo(_ *testing.T, cfg verify.Config, body []byte, at time.Time, _ string) (http.Header, string) {
	sp := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: body, Secret: cfg.Secrets[0], Timestamp: at})
	h := http.Header{}
	h.Set("Stripe-Signature", sp.Header)
	return h, ""
}

// signWithStandardLibrary signs with the Standard Webhooks reference
// library, under the webhook-* or (as Svix sends them) svix-* names.
func signWithStandardLibrary(prefix string) signer {
	return func(t *testing.T, cfg verify.Config, body []byte, at time.Time, id string) (http.Header, string) {
		t.Helper()
		wh, err := standardwebhooks.NewWebhook(cfg.Secrets[0])
		if err != nil {
			t.Fatal(err)
		}
		sig, err := wh.Sign(id, at, body)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		h.Set(prefix+"id", id)
		h.Set(prefix+"timestamp", strconv.FormatInt(at.Unix(), 10))
		h.Set(prefix+"signature", sig)
		return h, ""
	}
}

// withHeader adds a header holding the message id to what sign produces
// (for sources whose event id is a custom header).
func withHeader(sign signer, name string) signer {
	return func(t *testing.T, cfg verify.Config, body []byte, at time.Time, id string) (http.Header, string) {
		h, q := sign(t, cfg, body, at, id)
		h.Set(name, id)
		return h, q
	}
}

// jsonBody is a JSON event whose own "id" differs from the message id, so
// a header-based event id cannot be confused with the body's. Every body
// holds "1000" for tampering.
func jsonBody(id string) []byte {
	return fmt.Appendf(nil, `{"id":"body_%s","type":"thing.created","data":{"object":{"id":"obj_1","amount":1000}}}`, id)
}

// scheme is one configured source and how its sender signs.
type scheme struct {
	source string
	// cfg holds two secrets: the current one and the rotated one.
	cfg verify.Config
	// eventID is the event id spec; "" means the scheme's default.
	eventID string
	body    func(id string) []byte
	sign    signer
	// expectID is the event id the gateway must take; nil means id.
	expectID func(body []byte, id string) string
	// wrongSecret signs in the rejection cases.
	wrongSecret string
	// required are the headers whose absence is a 401 "missing".
	required []string
	// timestamped schemes reject stale and future timestamps.
	timestamped bool
	// tokenOnly schemes send a token and sign no body: an altered body
	// passes.
	tokenOnly bool
	// malformed are header values in the wrong format.
	malformed []headerValue
	// missingAs names the header an error names when a required header is
	// absent, where that is another one.
	missingAs map[string]string
}

type headerValue struct{ name, value string }

func strPtr(s string) *string { return &s }

var hex64 = strings.Repeat("ab", 32)

func schemes(t *testing.T) []scheme {
	return []scheme{
		{
			source: "stripe",
			cfg:    verify.Config{Scheme: verify.SchemeStripe, Secrets: []string{"whsec_stripe_current_5d1f", "whsec_stripe_rotated_9a7c"}},
			body: func(id string) []byte {
				return fmt.Appendf(nil, `{"id":%q,"object":"event","type":"charge.succeeded","data":{"object":{"id":"ch_1","amount":1000}}}`, id)
			},
			sign:        signWithStripeGo,
			wrongSecret: "whsec_stripe_wrong",
			required:    []string{"Stripe-Signature"},
			timestamped: true,
			malformed: []headerValue{
				{"Stripe-Signature", "t=yesterday,v1=" + hex64},
				{"Stripe-Signature", "t=" + strconv.FormatInt(time.Now().Unix(), 10) + ",v0=" + hex64},
				{"Stripe-Signature", "garbage"},
			},
		},
		{
			source:      "github",
			cfg:         verify.Config{Scheme: verify.SchemeGitHub, Secrets: []string{"gh-current-secret", "gh-rotated-secret"}},
			body:        jsonBody,
			sign:        signWithVerify,
			wrongSecret: "gh-wrong-secret",
			required:    []string{"X-Hub-Signature-256"},
			malformed: []headerValue{
				{"X-Hub-Signature-256", "sha1=" + hex64[:40]},
				{"X-Hub-Signature-256", "sha256=zz"},
			},
		},
		{
			source:      "standard",
			cfg:         verify.Config{Scheme: verify.SchemeStandard, Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_cm90YXRlZC1zdGFuZGFyZC1zZWNyZXQ="}},
			body:        jsonBody,
			sign:        signWithStandardLibrary("webhook-"),
			wrongSecret: "whsec_d3Jvbmctc3RhbmRhcmQtc2VjcmV0",
			required:    []string{"webhook-signature", "webhook-id", "webhook-timestamp"},
			timestamped: true,
			malformed: []headerValue{
				{"webhook-signature", "v1;abc"},
				{"webhook-timestamp", "yesterday"},
			},
		},
		{
			source:      "svix",
			cfg:         verify.Config{Scheme: verify.SchemeStandard, Secrets: []string{"whsec_c3ZpeC1jdXJyZW50LXNlY3JldA==", "whsec_c3ZpeC1yb3RhdGVkLXNlY3JldA=="}},
			body:        jsonBody,
			sign:        signWithStandardLibrary("svix-"),
			wrongSecret: "whsec_d3Jvbmctc3ZpeC1zZWNyZXQ=",
			required:    []string{"svix-signature", "svix-id", "svix-timestamp"},
			// Without any signature header, the error names the standard one.
			missingAs:   map[string]string{"svix-signature": "webhook-signature"},
			timestamped: true,
			malformed: []headerValue{
				{"svix-signature", "v1"},
				{"svix-timestamp", "-5"},
			},
		},
		{
			source:      "shopify",
			cfg:         verify.Config{Scheme: verify.SchemeShopify, Secrets: []string{"shpss_current", "shpss_rotated"}},
			body:        jsonBody,
			sign:        signWithVerify,
			wrongSecret: "shpss_wrong",
			required:    []string{"X-Shopify-Hmac-Sha256"},
			malformed:   []headerValue{{"X-Shopify-Hmac-Sha256", "not base64!"}, {"X-Shopify-Hmac-Sha256", hex64}},
		},
		{
			source: "slack",
			cfg:    verify.Config{Scheme: verify.SchemeSlack, Secrets: []string{"8f742231b10e8888abcd99yyyzzz85a5", "slack-rotated-signing-secret"}},
			body: func(id string) []byte {
				return fmt.Appendf(nil, `{"token":"x","team_id":"T1","type":"event_callback","event_id":%q,"event_time":1700000000,"event":{"type":"app_mention","text":"amount 1000"}}`, id)
			},
			sign:        signWithVerify,
			wrongSecret: "slack-wrong",
			required:    []string{"X-Slack-Signature", "X-Slack-Request-Timestamp"},
			timestamped: true,
			malformed: []headerValue{
				{"X-Slack-Signature", "v1=" + hex64},
				{"X-Slack-Request-Timestamp", "1.5e9"},
			},
		},
		{
			source: "twilio",
			cfg:    verify.Config{Scheme: verify.SchemeTwilio, Secrets: []string{"12345", "twilio-rotated-token"}},
			body: func(id string) []byte {
				return fmt.Appendf(nil, "AccountSid=AC123&Body=amount+1000&From=%%2B14158675310&MessageSid=SM%s&To=%%2B14155550100", id)
			},
			sign:        signWithVerify,
			wrongSecret: "twilio-wrong",
			required:    []string{"X-Twilio-Signature"},
			malformed:   []headerValue{{"X-Twilio-Signature", "%%%"}, {"X-Twilio-Signature", "c2hvcnQ="}},
		},
		{
			source:      "twilio-json",
			cfg:         verify.Config{Scheme: verify.SchemeTwilio, Secrets: []string{"twilio-json-token", "twilio-json-rotated"}},
			body:        jsonBody,
			sign:        signWithVerify,
			wrongSecret: "twilio-wrong",
			required:    []string{"X-Twilio-Signature"},
			malformed:   []headerValue{{"X-Twilio-Signature", "!!"}},
		},
		{
			source: "hmac-hex",
			cfg: verify.Config{Scheme: verify.SchemeHMACSHA256, Secrets: []string{"hmac-hex-current", "hmac-hex-rotated"},
				TimestampHeader: "X-Webhook-Timestamp", SignedContent: "v1:{timestamp}:{body}"},
			eventID:     "header:X-Event-Id",
			body:        jsonBody,
			sign:        withHeader(signWithVerify, "X-Event-Id"),
			wrongSecret: "hmac-wrong",
			required:    []string{"X-Webhook-Signature", "X-Webhook-Timestamp"},
			timestamped: true,
			malformed: []headerValue{
				{"X-Webhook-Signature", hex64},
				{"X-Webhook-Signature", "sha256=" + hex64[:62]},
				{"X-Webhook-Timestamp", "now"},
			},
		},
		{
			source: "hmac-base64",
			cfg: verify.Config{Scheme: verify.SchemeHMACSHA256, Secrets: []string{"hmac-b64-current", "hmac-b64-rotated"},
				Header: "X-Acme-Signature", Encoding: "base64", Prefix: strPtr(""),
				TimestampHeader: "X-Acme-Timestamp", SignedContent: "{timestamp}\n{body}"},
			eventID: "json:data.object.id",
			body: func(id string) []byte {
				return fmt.Appendf(nil, `{"id":"body_%s","data":{"object":{"id":%q,"amount":1000}}}`, id, id)
			},
			sign:        signWithVerify,
			wrongSecret: "hmac-wrong",
			required:    []string{"X-Acme-Signature", "X-Acme-Timestamp"},
			timestamped: true,
			malformed: []headerValue{
				{"X-Acme-Signature", hex64},
				{"X-Acme-Timestamp", "0x10"},
			},
		},
		{
			source:      "hmac-bodyhash",
			cfg:         verify.Config{Scheme: verify.SchemeHMACSHA256, Secrets: []string{"hmac-body-current", "hmac-body-rotated"}},
			eventID:     "body-sha256",
			body:        jsonBody,
			sign:        signWithVerify,
			expectID:    bodySHA256,
			wrongSecret: "hmac-wrong",
			required:    []string{"X-Webhook-Signature"},
			malformed:   []headerValue{{"X-Webhook-Signature", "sha256="}},
		},
		{
			source:      "meta",
			cfg:         verify.Config{Scheme: verify.SchemeMeta, Secrets: []string{"meta-app-secret", "meta-rotated-secret"}, VerifyToken: "meta-verify-token"},
			body:        metaBody,
			sign:        signMeta,
			expectID:    bodySHA256,
			wrongSecret: "meta-wrong-secret",
			required:    []string{"X-Hub-Signature-256"},
			malformed:   []headerValue{{"X-Hub-Signature-256", "sha1=" + hex64[:40]}, {"X-Hub-Signature-256", "sha256=" + hex64[:10]}},
		},
		{
			source:      "zoom",
			cfg:         verify.Config{Scheme: verify.SchemeZoom, Secrets: []string{"zoom-secret-token", "zoom-rotated-token"}},
			body:        zoomBody,
			sign:        signZoom,
			expectID:    bodySHA256,
			wrongSecret: "zoom-wrong-token",
			required:    []string{"x-zm-signature", "x-zm-request-timestamp"},
			timestamped: true,
			malformed: []headerValue{
				{"x-zm-signature", "v1=" + hex64},
				{"x-zm-request-timestamp", "1.7e9"},
			},
		},
		{
			source:      "discord",
			cfg:         verify.Config{Scheme: verify.SchemeDiscord, Secrets: []string{publicHex("discord-current"), publicHex("discord-rotated")}},
			body:        discordBody,
			sign:        signDiscord,
			expectID:    bodySHA256,
			wrongSecret: publicHex("discord-wrong"),
			required:    []string{"X-Signature-Ed25519", "X-Signature-Timestamp"},
			timestamped: true,
			malformed: []headerValue{
				{"X-Signature-Ed25519", hex64},
				{"X-Signature-Timestamp", "now"},
			},
		},
		{
			source:      "telegram",
			cfg:         verify.Config{Scheme: verify.SchemeTelegram, Secrets: []string{"tg-secret_token-1", "tg-rotated-token"}},
			body:        telegramBody,
			sign:        signTelegram,
			expectID:    func(_ []byte, id string) string { return strconv.FormatUint(uint64(telegramUpdateID(id)), 10) },
			wrongSecret: "tg-wrong-token",
			required:    []string{"X-Telegram-Bot-Api-Secret-Token"},
			tokenOnly:   true,
		},
		{
			source:      "gitlab",
			cfg:         verify.Config{Scheme: verify.SchemeGitLab, Secrets: []string{"glpat-ish-token", "gitlab-rotated-token"}},
			body:        jsonBody,
			sign:        signGitLab,
			wrongSecret: "gitlab-wrong-token",
			required:    []string{"X-Gitlab-Token"},
			tokenOnly:   true,
		},
		{
			source:      "sendgrid",
			cfg:         verify.Config{Scheme: verify.SchemeSendGrid, Secrets: []string{sendgridPublicKey(t), sendgridPublicKey(t)}},
			body:        sendgridBody,
			sign:        signSendGrid,
			expectID:    bodySHA256,
			wrongSecret: sendgridPublicKey(t),
			required:    []string{"X-Twilio-Email-Event-Webhook-Signature", "X-Twilio-Email-Event-Webhook-Timestamp"},
			timestamped: true,
			malformed: []headerValue{
				{"X-Twilio-Email-Event-Webhook-Signature", "not base64!"},
				{"X-Twilio-Email-Event-Webhook-Timestamp", "soon"},
			},
		},
		{
			source:      "paddle",
			cfg:         verify.Config{Scheme: verify.SchemePaddle, Secrets: []string{"pdl_ntfset_current", "pdl_ntfset_rotated"}},
			body:        paddleBody,
			sign:        signPaddle,
			wrongSecret: "pdl_ntfset_wrong",
			required:    []string{"Paddle-Signature"},
			timestamped: true,
			malformed: []headerValue{
				{"Paddle-Signature", "h1=" + hex64},
				{"Paddle-Signature", "ts=1700000000;h1=zz"},
				{"Paddle-Signature", "garbage"},
			},
		},
		{
			source:      "razorpay",
			cfg:         verify.Config{Scheme: verify.SchemeRazorpay, Secrets: []string{"rzp-webhook-secret", "rzp-rotated-secret"}},
			body:        razorpayBody,
			sign:        signRazorpay,
			wrongSecret: "rzp-wrong-secret",
			required:    []string{"X-Razorpay-Signature"},
			malformed:   []headerValue{{"X-Razorpay-Signature", "sha256=" + hex64}, {"X-Razorpay-Signature", hex64[:40]}},
		},
		{
			source:      "linear",
			cfg:         verify.Config{Scheme: verify.SchemeLinear, Secrets: []string{"lin_wh_current", "lin_wh_rotated"}},
			body:        linearBody,
			sign:        signLinear,
			wrongSecret: "lin_wh_wrong",
			required:    []string{"Linear-Signature"},
			malformed:   []headerValue{{"Linear-Signature", "sha256=" + hex64}},
		},
		{
			source:      "square",
			cfg:         verify.Config{Scheme: verify.SchemeSquare, Secrets: []string{"sq-signature-key", "sq-rotated-key"}},
			body:        squareBody,
			sign:        signSquare,
			wrongSecret: "sq-wrong-key",
			required:    []string{"x-square-hmacsha256-signature"},
			malformed:   []headerValue{{"x-square-hmacsha256-signature", hex64}, {"x-square-hmacsha256-signature", "!!"}},
		},
		{
			source: "none",
			cfg:    verify.Config{Scheme: verify.SchemeNone, AllowUnsigned: true},
			// The body's id is the event id here.
			eventID: "json:data.object.id",
			body: func(id string) []byte {
				return fmt.Appendf(nil, `{"data":{"object":{"id":%q}}}`, id)
			},
			sign: signWithVerify,
		},
	}
}

// TestEveryScheme proves each signature scheme end to end: the provider's
// signature is accepted (also under the rotated secret) and delivered once
// with the key built from the scheme's event id; every forgery, stale or
// future timestamp, missing or malformed header gets a 401 that names the
// failed check, never a secret, and records nothing.
func TestEveryScheme(t *testing.T) {
	t.Parallel()
	dest := newDestination(t)
	all := schemes(t)
	p := startSchemes(t, dest, all)
	checkSchemes(t, p, dest, all)

	// Not parallel: it runs before the parallel subtests start, so the
	// slack source's row count is stable.
	t.Run("slack url_verification", func(t *testing.T) {
		slackURLVerification(t, p)
	})

	// Not parallel either. A Svix sender's event id is the signed svix-id,
	// even when someone adds an unsigned webhook-id header to a copy.
	t.Run("svix event id is the signed svix-id", func(t *testing.T) {
		body := jsonBody("evt_svix_pinned")
		h, _ := signWithStandardLibrary("svix-")(t, p.Sources["svix"], body, time.Now(), "evt_svix_pinned")
		h.Set("webhook-id", "evt_svix_forged")
		code, answer := p.Post(t, "/webhooks/svix", h, body)
		if code != http.StatusAccepted || !strings.Contains(string(answer), `"event_id":"evt_svix_pinned"`) {
			t.Fatalf("got %d %s, want 202 with event_id evt_svix_pinned", code, answer)
		}
	})
}

// startSchemes starts a pipeline with a source of each of all, every one
// delivering to dest.
func startSchemes(t *testing.T, dest *destination, all []scheme) *pipelinetest.Pipeline {
	specs := make([]pipelinetest.SourceSpec, len(all))
	for i, s := range all {
		specs[i] = pipelinetest.SourceSpec{Name: s.source, Verify: s.cfg, EventID: s.eventID, Destinations: map[string]string{"app": dest.URL}}
	}
	return pipelinetest.Start(t, pipelinetest.Options{Sources: specs})
}

// checkSchemes runs, as parallel subtests of t, every scheme's checks
// (TestEveryScheme's doc says which).
func checkSchemes(t *testing.T, p *pipelinetest.Pipeline, dest *destination, all []scheme) {
	for _, s := range all {
		t.Run(s.source, func(t *testing.T) {
			t.Parallel()
			cfg := p.Sources[s.source] // as configured (twilio's public URL filled in)
			withSecret := func(secret string) verify.Config {
				c := cfg
				if secret != "" {
					c.Secrets = []string{secret}
				}
				return c
			}
			post := func(h http.Header, q string, body []byte) (int, []byte) {
				path := "/webhooks/" + s.source
				if q != "" {
					path += "?" + q
				}
				return p.Post(t, path, h, body)
			}
			expectID := func(body []byte, id string) string {
				if s.expectID != nil {
					return s.expectID(body, id)
				}
				return id
			}

			// Valid: the current secret, then the rotated one.
			secrets := cfg.Secrets
			if len(secrets) == 0 {
				secrets = []string{""}
			}
			var keys []string
			for i, secret := range secrets {
				id := fmt.Sprintf("evt_%s_ok_%d", strings.ReplaceAll(s.source, "-", "_"), i)
				body := s.body(id)
				h, q := s.sign(t, withSecret(secret), body, time.Now(), id)
				code, answer := post(h, q, body)
				want := expectID(body, id)
				var acc struct {
					Status  string `json:"status"`
					Source  string `json:"source"`
					EventID string `json:"event_id"`
				}
				_ = json.Unmarshal(answer, &acc)
				if r := verify.SchemeDefaults(s.cfg.Scheme).Respond; r != nil {
					// The answer the sender expects; the event is in the table.
					if code != r.Status || string(answer) != r.Body ||
						p.Schema.Int(t, `SELECT count(*) FROM events WHERE source = $1 AND external_id = $2`, s.source, want) != 1 {
						t.Fatalf("secret #%d: got %d %q, want %d %q and event %q recorded", i+1, code, answer, r.Status, r.Body, want)
					}
				} else if code != http.StatusAccepted || acc.Status != "accepted" || acc.Source != s.source || acc.EventID != want {
					t.Fatalf("secret #%d: got %d %s, want 202 accepted with event_id %q", i+1, code, answer, want)
				}
				keys = append(keys, s.source+":app:"+want)
			}
			for _, key := range keys {
				pipelinetest.Eventually(t, 15*time.Second, "delivery of "+key, func() bool { return dest.sink.Count(key) >= 1 })
			}

			if s.eventID == "body-sha256" || s.eventID == "" && verify.SchemeDefaults(s.cfg.Scheme).EventID == "body-sha256" {
				// Identical bodies count as one event.
				body := s.body(fmt.Sprintf("evt_%s_ok_0", strings.ReplaceAll(s.source, "-", "_")))
				h, q := s.sign(t, withSecret(secrets[0]), body, time.Now(), "other-message-id")
				code, answer := post(h, q, body)
				if r := verify.SchemeDefaults(s.cfg.Scheme).Respond; r != nil && (code != r.Status || string(answer) != r.Body) ||
					r == nil && (code != http.StatusOK || !strings.Contains(string(answer), `"duplicate"`)) {
					t.Errorf("identical body again: got %d %s, want 200 duplicate", code, answer)
				}
			}

			reject := func(t *testing.T, h http.Header, q string, body []byte, expectCheck, expectHeader string) {
				t.Helper()
				before := p.Schema.Int(t, `SELECT count(*) FROM events WHERE source = $1`, s.source)
				code, answer := post(h, q, body)
				if code != http.StatusUnauthorized {
					t.Fatalf("got %d %s, want 401", code, answer)
				}
				var e struct {
					Error string `json:"error"`
				}
				if err := json.Unmarshal(answer, &e); err != nil {
					t.Fatalf("401 body is not a JSON error: %s", answer)
				}
				msg := strings.ToLower(e.Error)
				if !strings.Contains(msg, expectCheck) || !strings.Contains(msg, strings.ToLower(expectHeader)) {
					t.Errorf("error %q, want it to name the check %q and the header %q", e.Error, expectCheck, expectHeader)
				}
				for _, secret := range append(append([]string(nil), s.cfg.Secrets...), s.wrongSecret) {
					if secret != "" && bytes.Contains(answer, []byte(secret)) {
						t.Errorf("answer echoes a secret: %s", answer)
					}
				}
				if after := p.Schema.Int(t, `SELECT count(*) FROM events WHERE source = $1`, s.source); after != before {
					t.Errorf("rejected delivery changed the events table: %d -> %d rows", before, after)
				}
			}
			sig := ""
			if len(s.required) > 0 {
				sig = s.required[0]
			}
			n := 0
			nextID := func() string {
				n++
				return fmt.Sprintf("evt_%s_bad_%d", strings.ReplaceAll(s.source, "-", "_"), n)
			}

			if s.cfg.Scheme != verify.SchemeNone {
				t.Run("wrong secret", func(t *testing.T) {
					id := nextID()
					body := s.body(id)
					h, q := s.sign(t, withSecret(s.wrongSecret), body, time.Now(), id)
					reject(t, h, q, body, "mismatch", sig)
				})
				if !s.tokenOnly {
					t.Run("tampered body", func(t *testing.T) {
						id := nextID()
						body := s.body(id)
						h, q := s.sign(t, withSecret(""), body, time.Now(), id)
						reject(t, h, q, bytes.Replace(body, []byte("1000"), []byte("9000"), 1), "mismatch", sig)
					})
				}
			}
			if s.timestamped {
				for name, at := range map[string]time.Time{"stale timestamp": time.Now().Add(-11 * time.Minute), "future timestamp": time.Now().Add(11 * time.Minute)} {
					t.Run(name, func(t *testing.T) {
						id := nextID()
						body := s.body(id)
						h, q := s.sign(t, withSecret(""), body, at, id)
						expectHeader := sig
						if len(s.required) > 1 {
							expectHeader = s.required[len(s.required)-1] // the timestamp header
						}
						reject(t, h, q, body, "outside tolerance", expectHeader)
					})
				}
			}
			for _, name := range s.required {
				t.Run("missing "+name, func(t *testing.T) {
					id := nextID()
					body := s.body(id)
					h, q := s.sign(t, withSecret(""), body, time.Now(), id)
					h.Del(name)
					expectHeader := name
					if as, ok := s.missingAs[name]; ok {
						expectHeader = as
					}
					reject(t, h, q, body, "missing", expectHeader)
				})
			}
			for i, m := range s.malformed {
				t.Run(fmt.Sprintf("malformed %s #%d", m.name, i+1), func(t *testing.T) {
					id := nextID()
					body := s.body(id)
					h, q := s.sign(t, withSecret(""), body, time.Now(), id)
					h.Set(m.name, m.value)
					reject(t, h, q, body, "malformed", m.name)
				})
			}

			// Nothing rejected reached the destination, and each accepted
			// event did exactly once.
			time.Sleep(500 * time.Millisecond)
			for _, key := range keys {
				if c := dest.sink.Count(key); c != 1 {
					t.Errorf("destination saw %s %d times, want 1", key, c)
				}
			}
			for i := 1; i <= n; i++ {
				key := fmt.Sprintf("%s:app:evt_%s_bad_%d", s.source, strings.ReplaceAll(s.source, "-", "_"), i)
				if c := dest.sink.Count(key); c != 0 {
					t.Errorf("destination saw rejected %s %d times", key, c)
				}
			}
		})
	}

}

// slackURLVerification answers Slack's url_verification.
func slackURLVerification(t *testing.T, p *pipelinetest.Pipeline) {
	cfg := p.Sources["slack"]
	body := []byte(`{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)
	before := p.Schema.Int(t, `SELECT count(*) FROM events WHERE source = $1`, "slack")
	h, _ := signWithVerify(t, cfg, body, time.Now(), "")
	code, answer := p.Post(t, "/webhooks/slack", h, body)
	var got struct {
		Challenge string `json:"challenge"`
	}
	if err := json.Unmarshal(answer, &got); code != http.StatusOK || err != nil || got.Challenge != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" {
		t.Fatalf("got %d %s, want 200 with the challenge", code, answer)
	}
	// Unsigned, the challenge is refused like any other request.
	code, answer = p.Post(t, "/webhooks/slack", http.Header{}, body)
	if code != http.StatusUnauthorized || bytes.Contains(answer, []byte("3eZbrw1aBm")) {
		t.Fatalf("unsigned challenge: got %d %s, want 401 without the challenge", code, answer)
	}
	if after := p.Schema.Int(t, `SELECT count(*) FROM events WHERE source = $1`, "slack"); after != before {
		t.Errorf("the challenge was recorded: %d -> %d rows", before, after)
	}
}
