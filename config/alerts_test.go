package config

import (
	"strings"
	"testing"
	"time"
)

// TestAlertsAndIssuesKeys: the alerts: block builds one channel per
// entry, checked at start (URLs, SMTP URL, addresses, the signing
// secret), with did-you-mean for a typo; issues.close_after and
// admin.public_url reach the process.
func TestAlertsAndIssuesKeys(t *testing.T) {
	t.Parallel()
	good := validConfig + `issues:
  close_after: 3
alerts:
  renotify: 30m
  channels:
    - slack: {webhook_url: "https://hooks.slack.example/services/T/B/x"}
    - webhook: {url: https://ops.example/hooks, signing_secret: "` + signingSecret + `"}
    - email: {smtp_url: "smtp://user:pass@127.0.0.1:2525", from: webhookd@example.com, to: [oncall@example.com]}
`
	withURL := strings.Replace(good, "admin_token: ${TOKEN}", "admin_token: ${TOKEN}\nadmin:\n  public_url: https://webhookd.example.com", 1)
	cfg, err := Parse("w.yaml", []byte(withURL), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Process
	if len(p.Alerts.Channels) != 3 || p.Alerts.Renotify != 30*time.Minute || p.Alerts.PublicURL != "https://webhookd.example.com" || p.Issues.CloseAfter != 3 {
		t.Fatalf("alerts %+v, issues %+v", p.Alerts, p.Issues)
	}
	for i, kind := range []string{"slack", "webhook", "email"} {
		if got := p.Alerts.Channels[i].Kind(); got != kind {
			t.Errorf("channel %d is %s, want %s", i, got, kind)
		}
	}
	publicURLWarnings := func(c *Config) int {
		n := 0
		for _, w := range c.Warnings {
			if strings.Contains(w.Error(), "admin.public_url") {
				n++
			}
		}
		return n
	}
	if n := publicURLWarnings(cfg); n != 0 {
		t.Errorf("warnings: %v", cfg.Warnings)
	}
	cfg, err = Parse("w.yaml", []byte(good), env(nil))
	if err != nil || publicURLWarnings(cfg) != 1 {
		t.Fatalf("without public_url: %v, warnings %v", err, cfg.Warnings)
	}

	for _, c := range []struct{ name, old, new, expect string }{
		{"slack url", "https://hooks.slack.example/services/T/B/x", "hooks.slack.example", "alerts.channels[0].slack.webhook_url: must be an absolute"},
		{"webhook secret", signingSecret, "not-a-secret", "alerts.channels[1].webhook.signing_secret: must be a Standard Webhooks secret"},
		{"smtp url", "smtp://user:pass@127.0.0.1:2525", "http://127.0.0.1", "alerts.channels[2].email.smtp_url: must be smtp://"},
		{"to", "to: [oncall@example.com]", "to: [not an address]", "alerts.channels[2].email.to[0]: must be an email address"},
		{"typo", "webhook_url:", "webhok_url:", `alerts.channels[0].slack.webhok_url: unknown key (did you mean webhook_url?)`},
		{"two kinds", `- slack: {webhook_url: "https://hooks.slack.example/services/T/B/x"}`,
			`- slack: {webhook_url: "https://hooks.slack.example/services/T/B/x"}
      email: {smtp_url: "smtp://127.0.0.1", from: a@b.c, to: [d@e.f]}`, "alerts.channels[0]: name exactly one of slack, webhook or email"},
		{"close_after", "close_after: 3", "close_after: -1", "issues.close_after: must be between 1 and"},
		{"renotify", "renotify: 30m", "renotify: -1m", "alerts.renotify: must not be negative"},
	} {
		_, err := Parse("w.yaml", []byte(strings.Replace(good, c.old, c.new, 1)), env(nil))
		if err == nil || !strings.Contains(err.Error(), c.expect) {
			t.Errorf("%s: %v, want %q", c.name, err, c.expect)
		}
		if err != nil && strings.Contains(err.Error(), "user:pass@") {
			t.Errorf("%s: the error shows a credential: %v", c.name, err)
		}
	}
}
