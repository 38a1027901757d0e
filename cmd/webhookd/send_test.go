package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/config"
	"github.com/webhookd/webhookd/gateway/eventid"
	"github.com/webhookd/webhookd/gateway/sender"
	"github.com/webhookd/webhookd/gateway/verify"
)

// sendReceiver verifies what `webhookd send` posts, as the gateway would:
// verify.New on the receiving side, then the source's event id.
type sendReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	verifier verify.Verifier
	idSpec   eventid.Extractor
	typeSpec *eventid.Extractor
	calls    []sendCall
}

type sendCall struct {
	path, contentType string
	err               error
	eventID           string
	eventType         string
	body              []byte
}

func newSendReceiver(t *testing.T) *sendReceiver {
	r := &sendReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		call := sendCall{path: req.URL.Path, contentType: req.Header.Get("Content-Type"), body: body}
		call.err = r.verifier.Verify(verify.Request{Method: req.Method, Header: req.Header, Body: body, RawQuery: req.URL.RawQuery}, time.Now())
		if call.err == nil {
			call.eventID, call.err = r.idSpec.Extract(req.Header, body)
		}
		if call.err == nil && r.typeSpec != nil {
			call.eventType, _ = r.typeSpec.Extract(req.Header, body)
		}
		r.calls = append(r.calls, call)
		if call.err != nil {
			http.Error(w, call.err.Error(), http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, `{"status":"accepted","event_id":%q}`, call.eventID)
	}))
	t.Cleanup(r.Close)
	return r
}

// TestSendSignsEveryScheme runs `webhookd send` for a source of every
// scheme and checks that the receiving side verifies the signature and
// finds the event id where the source's event_id says.
func TestSendSignsEveryScheme(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		givenVerify string // YAML under verify:, indented by 6; {url} is the receiver's public URL
		givenID     string // event_id; "" for the scheme's default
		givenArgs   []string
		expectType  string // Content-Type the receiver gets
		expectID    func(body []byte) string
	}{
		{name: "stripe", givenVerify: "scheme: stripe\nsecrets: [whsec_send_test]"},
		{name: "github", givenVerify: "scheme: github\nsecrets: [gh-secret, gh-rotated]"},
		{name: "standard", givenVerify: "scheme: standard\nsecrets: [whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw]"},
		{name: "shopify", givenVerify: "scheme: shopify\nsecrets: [shpss_secret]"},
		{name: "slack", givenVerify: "scheme: slack\nsecrets: [slack-signing-secret]\ntolerance: 1m"},
		{name: "twilio", givenVerify: "scheme: twilio\nsecrets: [twilio-auth-token]\npublic_url: {url}"},
		{
			name:        "twilio-form",
			givenVerify: "scheme: twilio\nsecrets: [twilio-auth-token]\npublic_url: {url}",
			givenArgs:   []string{"--body", "AccountSid=AC1&Body=hello+world&From=%2B14158675310&To=%2B14155550100"},
			expectType:  "application/x-www-form-urlencoded",
		},
		{
			name:        "hmac-hex",
			givenVerify: "scheme: hmac-sha256\nsecrets: [hmac-secret]\ntimestamp_header: X-Webhook-Timestamp\nsigned_content: \"v1:{timestamp}:{body}\"",
			givenID:     "header:X-Event-Id",
		},
		{
			name:        "hmac-base64",
			givenVerify: "scheme: hmac-sha256\nsecrets: [hmac-secret]\nheader: X-Acme-Signature\nencoding: base64\nprefix: \"\"",
			givenID:     "json:event_id",
		},
		{
			name:        "hmac-bodyhash",
			givenVerify: "scheme: hmac-sha256\nsecrets: [hmac-secret]",
			givenID:     "body-sha256",
			expectID:    bodyID,
		},
		{name: "meta", givenVerify: "scheme: meta\nsecrets: [meta-app-secret]\nverify_token: meta-token", expectID: bodyID},
		{name: "zoom", givenVerify: "scheme: zoom\nsecrets: [zoom-secret-token]", expectID: bodyID},
		{
			// The key pair of RFC 8032's test 1: the portal shows the public key.
			name:        "discord",
			givenVerify: "scheme: discord\nsecrets: [d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a]",
			givenArgs:   []string{"--signing-key", "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"},
			expectID:    bodyID,
		},
		{name: "telegram", givenVerify: "scheme: telegram\nsecrets: [tg-token]", givenID: "json:id"},
		{name: "gitlab", givenVerify: "scheme: gitlab\nsecrets: [gitlab-token]"},
		{
			// SendGrid's published test key pair (sendgrid-go).
			name:        "sendgrid",
			givenVerify: "scheme: sendgrid\nsecrets: [MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA==]",
			givenArgs:   []string{"--signing-key", "MHcCAQEEIEQmZgBEh9DcU9zMl34czK3xov4AYvm9P3r7rNB2dNXtoAoGCCqGSM49AwEHoUQDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA=="},
			expectID:    bodyID,
		},
		{name: "msgraph", givenVerify: "scheme: msgraph\nsecrets: [graph-client-state]", expectID: bodyID},
		{name: "square", givenVerify: "scheme: square\nsecrets: [sq-signature-key]\npublic_url: {url}"},
		{name: "paddle", givenVerify: "scheme: paddle\nsecrets: [pdl_ntfset_secret]"},
		{name: "razorpay", givenVerify: "scheme: razorpay\nsecrets: [rzp-secret]"},
		{name: "linear", givenVerify: "scheme: linear\nsecrets: [lin_wh_secret]"},
		{name: "mailgun", givenVerify: "scheme: mailgun\nsecrets: [mg-signing-key]"},
		{name: "adyen", givenVerify: "scheme: adyen\nsecrets: [44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056]", expectID: bodyID},
		{name: "none", givenVerify: "scheme: none\nallow_unsigned: true", givenID: "json:id"},
		// The senders of issue 32 (sns is signed by AWS only).
		{name: "hubspot", givenVerify: "scheme: hubspot\nsecrets: [hs-client-secret]\npublic_url: {url}"},
		{name: "docusign", givenVerify: "scheme: docusign\nsecrets: [ds-hmac-key]", expectID: bodyID},
		{name: "typeform", givenVerify: "scheme: typeform\nsecrets: [tf-secret]"},
		{name: "alchemy", givenVerify: "scheme: alchemy\nsecrets: [whsec_alchemy]"},
		{name: "coinbase", givenVerify: "scheme: coinbase\nsecrets: [cb-shared-secret]"},
		{name: "xero", givenVerify: "scheme: xero\nsecrets: [xero-key]", expectID: bodyID},
		{name: "zendesk", givenVerify: "scheme: zendesk\nsecrets: [zd-secret]"},
		{name: "airwallex", givenVerify: "scheme: airwallex\nsecrets: [awx-secret]"},
		{name: "orb", givenVerify: "scheme: orb\nsecrets: [orb-secret]"},
		{name: "tiktok", givenVerify: "scheme: tiktok\nsecrets: [tt-client-secret]", expectID: bodyID},
		{
			// RFC 8032's test 1 key pair again, base64 as Telnyx shows it.
			name:        "telnyx",
			givenVerify: "scheme: telnyx\nsecrets: [11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=]",
			givenArgs:   []string{"--signing-key", "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"},
		},
		{name: "intercom", givenVerify: "scheme: intercom\nsecrets: [ic-client-secret]"},
		{name: "mailchimp", givenVerify: "scheme: mailchimp\nsecrets: [mandrill-key]\npublic_url: {url}", expectID: bodyID,
			expectType: "application/x-www-form-urlencoded"},
		{name: "x", givenVerify: "scheme: x\nsecrets: [x-consumer-secret]", expectID: bodyID},
		{name: "twitch", givenVerify: "scheme: twitch\nsecrets: [twitch-secret-0123456789]"},
		{name: "asana", givenVerify: "scheme: asana\nsecrets: [asana-hook-secret]", expectID: bodyID},
		{name: "dropbox", givenVerify: "scheme: dropbox\nsecrets: [dbx-app-secret]", expectID: bodyID},
		{name: "trello", givenVerify: "scheme: trello\nsecrets: [trello-app-secret]\npublic_url: {url}"},
		{name: "bitbucket", givenVerify: "scheme: bitbucket\nsecrets: [bb-secret]"},
		{name: "jira", givenVerify: "scheme: jira\nsecrets: [jira-secret]"},
		{name: "woocommerce", givenVerify: "scheme: woocommerce\nsecrets: [wc-secret]"},
		{name: "bigcommerce", givenVerify: "scheme: bigcommerce\nsecrets: [Bearer bc-token]"},
		{name: "calendly", givenVerify: "scheme: calendly\nsecrets: [cal-key]", expectID: bodyID},
		{name: "pagerduty", givenVerify: "scheme: pagerduty\nsecrets: [pd-secret]"},
		{name: "sentry", givenVerify: "scheme: sentry\nsecrets: [sentry-client-secret]"},
		{name: "vercel", givenVerify: "scheme: vercel\nsecrets: [vercel-secret]"},
		{name: "netlify", givenVerify: "scheme: netlify\nsecrets: [netlify-jws-secret]", expectID: bodyID},
		{name: "segment", givenVerify: "scheme: segment\nsecrets: [segment-secret]"},
		{name: "postmark", givenVerify: "scheme: postmark\nsecrets: [\"hook:pm-password\"]", expectID: bodyID},
		{name: "pipedrive", givenVerify: "scheme: pipedrive\nsecrets: [\"hook:pd-password\"]", expectID: bodyID},
		{name: "clerk", givenVerify: "scheme: clerk\nsecrets: [whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw]"},
		{name: "resend", givenVerify: "scheme: resend\nsecrets: [whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw]"},
		{name: "polar", givenVerify: "scheme: polar\nsecrets: [polar_whs_secret]"},
		{name: "lemonsqueezy", givenVerify: "scheme: lemonsqueezy\nsecrets: [ls-secret]", expectID: bodyID},
		{name: "checkout", givenVerify: "scheme: checkout\nsecrets: [cko-secret]"},
		{name: "gocardless", givenVerify: "scheme: gocardless\nsecrets: [gc-secret]", expectID: bodyID},
		{name: "recurly", givenVerify: "scheme: recurly\nsecrets: [recurly-key]"},
		{name: "webflow", givenVerify: "scheme: webflow\nsecrets: [wf-secret]", expectID: bodyID},
		{name: "contentful", givenVerify: "scheme: contentful\nsecrets: [cf-secret]\npublic_url: {url}", expectID: bodyID},
		{name: "sanity", givenVerify: "scheme: sanity\nsecrets: [sanity-secret]"},
		{name: "cal", givenVerify: "scheme: cal\nsecrets: [cal-secret]", expectID: bodyID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			recv := newSendReceiver(t)
			publicURL := recv.URL + "/webhooks/" + tc.name
			verifyYAML := strings.ReplaceAll(tc.givenVerify, "{url}", publicURL)
			yamlText := fmt.Sprintf("sources:\n  - name: %s\n    verify:\n%s\n", tc.name, sendIndent(verifyYAML, "      "))
			if tc.givenID != "" {
				yamlText += "    event_id: " + tc.givenID + "\n"
			}
			yamlText += "    destinations:\n      - name: app\n        url: http://127.0.0.1:9/app\n"
			path := filepath.Join(t.TempDir(), "webhookd.yaml")
			if err := os.WriteFile(path, []byte(yamlText), 0o600); err != nil {
				t.Fatal(err)
			}
			// The receiver checks as the gateway would, from the same config.
			cfg, err := config.Load(path)
			if err != nil {
				t.Fatalf("config:\n%s\n%v", yamlText, err)
			}
			src := cfg.Process.Sources.Gateway[tc.name]
			recv.verifier, recv.idSpec, recv.typeSpec = src.Verifier, src.EventID, src.EventType

			const id = "evt_send_1"
			var out bytes.Buffer
			cmd := rootCommand()
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(append([]string{"send", "-f", path, "--source", tc.name, "--url", recv.URL, "--id", id, "-n", "2"}, tc.givenArgs...))
			if err := cmd.Execute(); err != nil {
				t.Fatalf("send: %v\n%s", err, out.String())
			}

			recv.mu.Lock()
			defer recv.mu.Unlock()
			if len(recv.calls) != 2 {
				t.Fatalf("receiver got %d calls, want 2; output:\n%s", len(recv.calls), out.String())
			}
			for i, call := range recv.calls {
				if call.err != nil {
					t.Errorf("call %d: receiver rejected it: %v", i+1, call.err)
					continue
				}
				if call.path != "/webhooks/"+tc.name {
					t.Errorf("call %d: path %s, want /webhooks/%s", i+1, call.path, tc.name)
				}
				want := id
				if tc.expectID != nil {
					want = tc.expectID(call.body)
				}
				if call.eventID != want {
					t.Errorf("call %d: event id %q, want %q", i+1, call.eventID, want)
				}
				// A sender that names the type in a header (github,
				// shopify, slack's retries aside) gets the test event's,
				// so a filtered destination can be tried with send.
				if src.EventType != nil {
					if _, inHeader := src.EventType.Header(); inHeader && call.eventType != sender.DefaultType {
						t.Errorf("call %d: event type %q, want %q in the type header", i+1, call.eventType, sender.DefaultType)
					}
				}
				expectType := tc.expectType
				if expectType == "" {
					expectType = "application/json"
				}
				if call.contentType != expectType {
					t.Errorf("call %d: Content-Type %q, want %q", i+1, call.contentType, expectType)
				}
			}
			if got := strings.Count(out.String(), " 202 "); got != 2 {
				t.Errorf("output shows %d answers 202, want 2:\n%s", got, out.String())
			}
			if seen := recv.calls[0].eventID; !strings.HasPrefix(out.String(), "sending event "+seen+" ") {
				t.Errorf("output does not name the id the receiver saw (%s):\n%s", seen, out.String())
			}
		})
	}
}

func sendIndent(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}

// TestProvidersDocConfigs checks that every YAML snippet of
// docs/providers.md is a valid config.
func TestProvidersDocConfigs(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/providers.md")
	if err != nil {
		t.Fatal(err)
	}
	// Every secret ${VAR} gets a value that works for every scheme (the
	// whsec_<base64> form); the environment overrides stay unset.
	lookup := func(name string) (string, bool) {
		if !strings.HasSuffix(name, "_SECRET") && !strings.HasSuffix(name, "_TOKEN") {
			return "", false
		}
		if strings.HasPrefix(name, "TELEGRAM_") {
			return "telegram-secret_token", true // Telegram's alphabet has no '='
		}
		return "whsec_c2VjcmV0LWZvci1kb2NzLXRlc3Q=", true
	}
	blocks := strings.Split(string(doc), "```yaml\n")[1:]
	if len(blocks) < 8 {
		t.Fatalf("found %d YAML snippets, want one per provider", len(blocks))
	}
	schemes := map[string]bool{}
	for i, b := range blocks {
		snippet, _, _ := strings.Cut(b, "```")
		cfg, err := config.Parse(fmt.Sprintf("docs/providers.md snippet %d", i+1), []byte(snippet), lookup)
		if err != nil {
			t.Errorf("%v\n%s", err, snippet)
			continue
		}
		for _, s := range cfg.File.Sources {
			schemes[s.Verify.Scheme] = true
		}
	}
	for _, s := range verify.Schemes {
		if !schemes[s] {
			t.Errorf("no snippet for scheme %s", s)
		}
	}
}

// bodyID is the body-sha256 event id of b.
func bodyID(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
