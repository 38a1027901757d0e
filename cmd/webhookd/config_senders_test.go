package main

import (
	"strings"
	"testing"

	"github.com/webhookd/webhookd/gateway/verify"
)

// TestSenderConfigKeys maps the keys of issue 32 (the generic hmac's,
// sns's subscription_confirmation, a source's respond and
// max_body_bytes) and refuses a key that would set sns's test-only
// certificate trust from a file.
func TestSenderConfigKeys(t *testing.T) {
	t.Parallel()
	const yaml = `database_url: postgres://x
redis_url: redis://x
sources:
  - name: acme
    verify:
      scheme: hmac
      secrets: [s]
      algorithm: sha512
      encoding: base64url
      header: Acme-Signature
      signature_key: v1
      timestamp_key: t
      timestamp_format: unix_ms
      signed_content: "{timestamp_ms}.{body}"
    event_id: json:id
    respond: {status: 200, body: "[accepted]", content_type: text/plain}
    max_body_bytes: 2048
    destinations:
      - name: app
        url: http://127.0.0.1:9/app
  - name: sns
    verify:
      scheme: sns
      secrets: ["arn:aws:sns:us-east-1:123456789012:orders"]
      subscription_confirmation: show
    destinations:
      - name: app
        url: http://127.0.0.1:9/app
`
	cfg, err := parseConfig("w.yaml", []byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	v := cfg.Sources[0].verifyConfig()
	if v.Algorithm != "sha512" || v.SignatureKey != "v1" || v.TimestampKey != "t" || v.TimestampFormat != "unix_ms" || v.Encoding != "base64url" {
		t.Errorf("verify keys not mapped: %+v", v)
	}
	spec := cfg.Sources[0].sourceSpec()
	if spec.MaxBodyBytes != 2048 || spec.Respond == nil || *spec.Respond != (verify.Response{Status: 200, Body: "[accepted]", ContentType: "text/plain"}) {
		t.Errorf("respond/max_body_bytes not mapped: %+v %+v", spec.Respond, spec.MaxBodyBytes)
	}
	if got := cfg.Sources[1].verifyConfig().SubscriptionConfirmation; got != verify.SNSShow {
		t.Errorf("subscription_confirmation = %q", got)
	}

	for name, tc := range map[string]struct{ from, to, expect string }{
		"sns trust is no key":  {"      subscription_confirmation: show\n", "      sns: {allow_host: 127.0.0.1}\n", "sources[1].verify.sns: unknown key"},
		"respond not 2xx":      {"status: 200,", "status: 302,", "sources[0].respond.status"},
		"negative body limit":  {"max_body_bytes: 2048", "max_body_bytes: -1", "sources[0].max_body_bytes"},
		"algorithm":            {"algorithm: sha512", "algorithm: md5", "sources[0].verify"},
		"subscription setting": {"subscription_confirmation: show", "subscription_confirmation: later", "sources[1].verify"},
	} {
		_, err := parseConfig("w.yaml", []byte(strings.Replace(yaml, tc.from, tc.to, 1)), func(string) (string, bool) { return "", false })
		if err == nil || !strings.Contains(err.Error(), tc.expect) {
			t.Errorf("%s: %v, want it to name %s", name, err, tc.expect)
		}
	}
}
