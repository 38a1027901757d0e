package config

import (
	"strings"
	"testing"

	"github.com/webhookd/webhookd/gateway/verify"
)

// TestSenderConfigKeys decodes the keys of issue 32 (the generic hmac's,
// sns's subscription_confirmation, a source's respond and
// max_body_bytes) and refuses a key that would set sns's test-only
// certificate trust from a file.
func TestSenderConfigKeys(t *testing.T) {
	t.Parallel()
	const yaml = `database_url: postgres://postgres@127.0.0.1:5432/webhookd
redis_url: redis://127.0.0.1:6379/0
sources:
  - name: acme
    verify:
      scheme: hmac
      secrets: [acme-secret-0123456789abcdef]
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
        url: http://127.0.0.1:9000/app
  - name: sns
    verify:
      scheme: sns
      secrets: ["arn:aws:sns:us-east-1:123456789012:orders"]
      subscription_confirmation: show
    destinations:
      - name: app
        url: http://127.0.0.1:9000/app
`
	none := func(string) (string, bool) { return "", false }
	cfg, err := Parse("w.yaml", []byte(yaml), none)
	if err != nil {
		t.Fatal(err)
	}
	v := cfg.File.Sources[0].Verify
	if v.Algorithm != "sha512" || v.SignatureKey != "v1" || v.TimestampKey != "t" || v.TimestampFormat != "unix_ms" || v.Encoding != "base64url" {
		t.Errorf("verify keys not decoded: %+v", v)
	}
	src := cfg.Process.Sources.Gateway["acme"]
	if src.MaxBodyBytes != 2048 || src.Respond == nil || *src.Respond != (verify.Response{Status: 200, Body: "[accepted]", ContentType: "text/plain"}) {
		t.Errorf("respond/max_body_bytes not built: %+v %d", src.Respond, src.MaxBodyBytes)
	}
	if got := cfg.File.Sources[1].Verify.SubscriptionConfirmation; got != verify.SNSShow {
		t.Errorf("subscription_confirmation = %q", got)
	}
	if cfg.File.Sources[1].Verify.SNS != nil {
		t.Error("the sns trust was set from a file")
	}

	for name, tc := range map[string]struct{ from, to, expect string }{
		"sns trust is no key":  {"      subscription_confirmation: show\n", "      sns: {allow_host: 127.0.0.1}\n", "verify.sns"},
		"respond not 2xx":      {"status: 200,", "status: 302,", "respond.status"},
		"negative body limit":  {"max_body_bytes: 2048", "max_body_bytes: -1", "max_body_bytes"},
		"huge body limit":      {"max_body_bytes: 2048", "max_body_bytes: 1000000000", "sources[0].max_body_bytes: must be at most"},
		"algorithm":            {"algorithm: sha512", "algorithm: md5", "algorithm"},
		"subscription setting": {"subscription_confirmation: show", "subscription_confirmation: later", "subscription_confirmation"},
	} {
		_, err := Parse("w.yaml", []byte(strings.Replace(yaml, tc.from, tc.to, 1)), none)
		if err == nil || !strings.Contains(err.Error(), tc.expect) {
			t.Errorf("%s: %v, want it to name %s", name, err, tc.expect)
		}
	}
}
