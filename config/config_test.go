package config

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

const validConfig = `
listen: ":9999"
database_url: postgres://postgres@127.0.0.1:5432/webhookd
redis_url: redis://127.0.0.1:6379/0
admin_token: ${TOKEN}
retention: 48h
lease: 1m
sources:
  - name: stripe
    verify:
      scheme: stripe
      secrets: ["${STRIPE_SECRET}", "whsec_old"]
      tolerance: 5m
    order:
      entity: json:data.object.id
      version: json:created
    destinations:
      - name: billing
        url: http://127.0.0.1:9000/hooks/stripe
        timeout: 10s
        max_attempts: 3
        signing_secret: ${SIGNING}
  - name: gh
    verify:
      scheme: github
      secrets: ["s3cr3t"]
    destinations:
      - name: ci
        url: https://ci.example.com/hook
`

// signingSecret is a Standard Webhooks secret for the billing destination.
const signingSecret = "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

// env returns a lookup of m over the variables validConfig needs, so a
// test names only those it changes (an unset ${VAR} is an error).
func env(m map[string]string) func(string) (string, bool) {
	all := map[string]string{"TOKEN": "test-admin-token-0123456789", "STRIPE_SECRET": "whsec_x", "SIGNING": signingSecret}
	maps.Copy(all, m)
	return func(k string) (string, bool) {
		v, ok := all[k]
		return v, ok
	}
}

func TestParseConfig(t *testing.T) {
	t.Parallel()
	cfg, err := Parse("w.yaml", []byte(validConfig), env(map[string]string{
		"TOKEN": "admin-token-0123456789", "STRIPE_SECRET": "whsec_new", "SIGNING": signingSecret,
		"DATABASE_URL": "postgres://postgres@db:5432/prod",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.File.AdminToken != "admin-token-0123456789" || cfg.File.Sources[0].Verify.Secrets[0] != "whsec_new" {
		t.Errorf("${VAR} not expanded: token %q, secret %q", cfg.File.AdminToken, cfg.File.Sources[0].Verify.Secrets[0])
	}
	if cfg.Process.DatabaseURL != "postgres://postgres@db:5432/prod" {
		t.Errorf("DATABASE_URL did not override the file: %s", cfg.Process.DatabaseURL)
	}
	if cfg.Process.Lease != time.Minute || cfg.Process.Recovery.Interval != 2*time.Second || cfg.Process.Retention != 48*time.Hour {
		t.Errorf("lease %s, recovery interval %s, retention %s; want 1m, 2s and 48h",
			cfg.Process.Lease, cfg.Process.Recovery.Interval, cfg.Process.Retention)
	}
	routes := cfg.Process.Sources.Routes
	if d := routes["stripe"]["billing"]; d.MaxAttempts != 3 || d.Timeout != 10*time.Second || d.Signer == nil {
		t.Errorf("billing destination: %+v", d)
	}
	if d := routes["gh"]["ci"]; d.MaxAttempts != 20 || d.Timeout != 10*time.Second || d.Signer != nil {
		t.Errorf("defaults not applied: %+v", d)
	}
	sources := cfg.Process.Sources.Gateway
	if sources["stripe"].OrderEntity == nil || sources["gh"].OrderEntity != nil {
		t.Errorf("order extractors: %+v", sources)
	}
	if got := sources["gh"].EventID.String(); got != "header:X-GitHub-Delivery" {
		t.Errorf("github default event id = %q", got)
	}
}

// TestParseConfigExpandsValuesWhole: a ${VAR} is expanded into the value
// it stands in, after parsing, so a secret holding YAML syntax is kept
// whole (expanded into the text, " #" started a comment and cut it), and a
// plain value is still typed from what it expands to.
func TestParseConfigExpandsValuesWhole(t *testing.T) {
	t.Parallel()
	yaml := strings.Replace(validConfig, "lease: 1m", "lease: ${LEASE}\nmax_body_bytes: ${MAX}", 1)
	yaml = strings.Replace(yaml, `secrets: ["s3cr3t"]`, "secrets:\n        - ${SECRET}\n        - '${SECRET}'", 1)
	for _, secret := range []string{
		"s3c #r3t",   // cut at " #" when expanded into the text
		"s3c: r3t",   // a mapping
		`"s3cr3t" x`, // a quoted string and more
		`s3c'r"3t`,   // quotes inside
		`s3c #r3t: "q" 'p' {x} [y] & *z`,
	} {
		cfg, err := Parse("w.yaml", []byte(yaml), env(map[string]string{
			"TOKEN": secret + " (long enough for a token)", "STRIPE_SECRET": secret, "SIGNING": signingSecret, "SECRET": secret,
			"LEASE": "90s", "MAX": "2048",
		}))
		if err != nil {
			t.Errorf("secret %q: %v", secret, err)
			continue
		}
		for name, got := range map[string]string{
			"admin_token (plain)":                   strings.TrimSuffix(cfg.File.AdminToken, " (long enough for a token)"),
			"stripe secrets[0] (double-quoted)":     cfg.File.Sources[0].Verify.Secrets[0],
			"gh secrets[0] (plain, block sequence)": cfg.File.Sources[1].Verify.Secrets[0],
			"gh secrets[1] (single-quoted)":         cfg.File.Sources[1].Verify.Secrets[1],
		} {
			if got != secret {
				t.Errorf("%s = %q, want %q", name, got, secret)
			}
		}
		if cfg.Process.Lease != 90*time.Second || cfg.Process.MaxBodyBytes != 2048 {
			t.Errorf("lease %s, max_body_bytes %d; want 90s and 2048 from the environment", cfg.Process.Lease, cfg.Process.MaxBodyBytes)
		}
	}

	// Still refused: a value with a line break.
	if _, err := Parse("w.yaml", []byte(validConfig), env(map[string]string{"TOKEN": "a\nlisten: x"})); err == nil ||
		!strings.Contains(err.Error(), "${TOKEN} holds a line break") {
		t.Errorf("a value with a line break: %v", err)
	}
}

func TestParseConfigErrors(t *testing.T) {
	t.Parallel()
	base := func(edit func(string) string) string { return edit(validConfig) }
	cases := []struct {
		name       string
		givenYAML  string
		expectText []string
	}{
		{
			name:       "unknown top-level key",
			givenYAML:  base(func(s string) string { return s + "lsiten: x\n" }),
			expectText: []string{"w.yaml:30: lsiten: unknown key"},
		},
		{
			name:       "unknown nested key",
			givenYAML:  strings.Replace(validConfig, "timeout: 10s", "timeot: 10s", 1),
			expectText: []string{"w.yaml:20: sources[0].destinations[0].timeot: unknown key"},
		},
		{
			name:       "bad duration",
			givenYAML:  strings.Replace(validConfig, "lease: 1m", "lease: soon", 1),
			expectText: []string{`w.yaml:7: lease: "soon" is not a duration`},
		},
		{
			name:       "bad destination url",
			givenYAML:  strings.Replace(validConfig, "https://ci.example.com/hook", "ci.example.com/hook", 1),
			expectText: []string{"w.yaml:29", "sources[1].destinations[0].url", "absolute URL: http(s)://, nats://, amqp:// or kafka://"},
		},
		{
			name:       "bad event type spec",
			givenYAML:  strings.Replace(validConfig, "    destinations:\n      - name: ci", "    event_type: xml:type\n    destinations:\n      - name: ci", 1),
			expectText: []string{"w.yaml:27: sources[1].event_type:", `"xml:type"`},
		},
		{
			name:       "event type from a hash",
			givenYAML:  strings.Replace(validConfig, "    destinations:\n      - name: ci", "    event_type: body-sha256\n    destinations:\n      - name: ci", 1),
			expectText: []string{"w.yaml:27: sources[1].event_type:", "never a hash"},
		},
		{
			name:       "bad filter glob",
			givenYAML:  strings.Replace(validConfig, "url: https://ci.example.com/hook", "url: https://ci.example.com/hook\n        filter: [\"push\", \"pull_request.[a-z]\"]", 1),
			expectText: []string{"w.yaml:30: sources[1].destinations[0].filter: [1]: invalid glob", "only * is a wildcard"},
		},
		{
			name:       "forward_headers: not a header name",
			givenYAML:  strings.Replace(validConfig, "url: https://ci.example.com/hook", "url: https://ci.example.com/hook\n        forward_headers:\n          - X-Request-Id\n          - \"X Bad\"", 1),
			expectText: []string{"w.yaml:32: sources[1].destinations[0].forward_headers[1]:", "not a header name"},
		},
		{
			name:       "forward_headers: a header webhookd sets",
			givenYAML:  strings.Replace(validConfig, "url: https://ci.example.com/hook", "url: https://ci.example.com/hook\n        forward_headers: [Webhookd-Attempt]", 1),
			expectText: []string{"w.yaml:30: sources[1].destinations[0].forward_headers[0]:", "set by webhookd itself"},
		},
		{
			name:       "empty filter",
			givenYAML:  strings.Replace(validConfig, "url: https://ci.example.com/hook", "url: https://ci.example.com/hook\n        filter: []", 1),
			expectText: []string{"w.yaml:30: sources[1].destinations[0].filter:", "leave it out"},
		},
		{
			name: "filter on a source without event types",
			givenYAML: validConfig + `  - name: plain
    verify:
      scheme: hmac-sha256
      secrets: ["k"]
    event_id: json:id
    destinations:
      - name: app
        url: https://app.example.com/hook
        filter: ["a.*"]
`,
			expectText: []string{"w.yaml:38: sources[2].destinations[0].filter:", "no event type", "event_type"},
		},
		{
			name:       "duplicate source",
			givenYAML:  strings.Replace(validConfig, "name: gh", "name: stripe", 1),
			expectText: []string{"w.yaml:23", "sources[1].name", `duplicate source name "stripe"`},
		},
		{
			name: "duplicate destination",
			givenYAML: strings.Replace(validConfig, "      - name: ci\n        url: https://ci.example.com/hook",
				"      - name: ci\n        url: https://ci.example.com/hook\n      - name: ci\n        url: https://ci.example.com/other", 1),
			expectText: []string{"sources[1].destinations[1].name", `duplicate destination name "ci"`},
		},
		{
			name:       "bad source name",
			givenYAML:  strings.Replace(validConfig, "name: gh", "name: GitHub", 1),
			expectText: []string{"sources[1].name", "[a-z0-9_-]+"},
		},
		{
			name:       "unknown scheme",
			givenYAML:  strings.Replace(validConfig, "scheme: github", "scheme: gitlub", 1),
			expectText: []string{"sources[1].verify", "gitlub"},
		},
		{
			name:       "missing secret",
			givenYAML:  strings.Replace(validConfig, `secrets: ["s3cr3t"]`, `secrets: []`, 1),
			expectText: []string{"sources[1].verify", "secrets"},
		},
		{
			name:       "meta without verify_token",
			givenYAML:  strings.Replace(validConfig, "scheme: github", "scheme: meta", 1),
			expectText: []string{"sources[1].verify", "verify.verify_token: required for scheme meta"},
		},
		{
			name:       "verify_token on another scheme",
			givenYAML:  strings.Replace(validConfig, "scheme: github", "scheme: github\n      verify_token: tok", 1),
			expectText: []string{"sources[1].verify", "verify.verify_token: only used by scheme meta"},
		},
		{
			name:       "square without public_url",
			givenYAML:  strings.Replace(validConfig, "scheme: github", "scheme: square", 1),
			expectText: []string{"sources[1].verify", "verify.public_url: required for scheme square"},
		},
		{
			name:       "discord secret that is not a public key",
			givenYAML:  strings.Replace(validConfig, "scheme: github", "scheme: discord", 1),
			expectText: []string{"sources[1].verify", "verify.secrets[0]: want the application's public key"},
		},
		{
			name:       "bad event id spec",
			givenYAML:  strings.Replace(validConfig, "    destinations:\n      - name: ci", "    event_id: xml:id\n    destinations:\n      - name: ci", 1),
			expectText: []string{"sources[1].event_id"},
		},
		{
			name:       "timeout not shorter than lease",
			givenYAML:  strings.Replace(validConfig, "timeout: 10s", "timeout: 2m", 1),
			expectText: []string{"sources[0].destinations[0].timeout", "shorter than lease"},
		},
		{
			name:       "recovery interval longer than half the lease",
			givenYAML:  strings.Replace(validConfig, "lease: 1m", "lease: 1m\nworker:\n  recovery_interval: 45s", 1),
			expectText: []string{"worker.recovery_interval", "lease/2"},
		},
		{
			name:       "a key of an earlier version",
			givenYAML:  strings.Replace(validConfig, "lease: 1m", "lease: 1m\nworker:\n  sweep_interval: 10s", 1),
			expectText: []string{"worker.sweep_interval: unknown key (replaced by worker.recovery_interval)"},
		},
		{
			name:       "signing secret not in Standard Webhooks form",
			givenYAML:  strings.Replace(validConfig, "signing_secret: ${SIGNING}", "signing_secret: s3cr3t", 1),
			expectText: []string{"sources[0].destinations[0].signing_secret", "whsec_"},
		},
		{
			name: "hmac timestamp header that is not signed",
			givenYAML: validConfig + `  - name: acme
    verify:
      scheme: hmac-sha256
      secrets: ["s3cr3t"]
      timestamp_header: X-Acme-Timestamp
      signed_content: "{body}"
    event_id: json:id
    destinations:
      - name: app
        url: http://127.0.0.1:9000/hooks/acme
`,
			expectText: []string{"sources[2].verify", "verify.timestamp_header", "signed_content must contain {timestamp}"},
		},
		{
			name: "reorder_window without fifo",
			givenYAML: strings.Replace(validConfig, "      secrets: [\"s3cr3t\"]\n",
				"      secrets: [\"s3cr3t\"]\n    order:\n      entity: json:repository.id\n      version: json:v\n      reorder_window: 2s\n", 1),
			expectText: []string{"sources[1].order.reorder_window", "applies only with mode: fifo and a version"},
		},
		{
			name: "reorder_window out of range",
			givenYAML: strings.Replace(validConfig, "      secrets: [\"s3cr3t\"]\n",
				"      secrets: [\"s3cr3t\"]\n    order:\n      entity: json:repository.id\n      version: json:v\n      mode: fifo\n      reorder_window: 2h\n", 1),
			expectText: []string{"sources[1].order.reorder_window", "out of range"},
		},
		{
			name: "order version from a header github does not sign",
			givenYAML: strings.Replace(validConfig, "      secrets: [\"s3cr3t\"]\n",
				"      secrets: [\"s3cr3t\"]\n    order:\n      entity: json:repository.id\n      version: header:X-Version\n", 1),
			expectText: []string{"w.yaml:29", "sources[1].order.version", "header X-Version is not covered by scheme github's signature", "order.allow_unsigned_header"},
		},
		{
			name:       "order entity from a header stripe does not sign",
			givenYAML:  strings.Replace(validConfig, "entity: json:data.object.id", "entity: header:X-Entity", 1),
			expectText: []string{"sources[0].order.entity", "header X-Entity is not covered by scheme stripe's signature"},
		},
		{
			name:       "duplicate_content_window longer than retention",
			givenYAML:  strings.Replace(validConfig, "      secrets: [\"s3cr3t\"]\n", "      secrets: [\"s3cr3t\"]\n    duplicate_content_window: 72h\n", 1),
			expectText: []string{"w.yaml:27", "sources[1].duplicate_content_window", "at most retention"},
		},
		{
			name: "duplicate_content_window on an unsigned source",
			givenYAML: validConfig + `  - name: legacy
    verify: {scheme: none, allow_unsigned: true}
    event_id: json:id
    duplicate_content_window: 1h
    destinations:
      - name: app
        url: http://127.0.0.1:9000/hooks/legacy
`,
			expectText: []string{"sources[2].duplicate_content_window", "scheme none signs nothing"},
		},
		{
			name:       "rate limit that is not N/s or N/m",
			givenYAML:  strings.Replace(validConfig, "        max_attempts: 3\n", "        max_attempts: 3\n        rate_limit: 50 per second\n", 1),
			expectText: []string{"sources[0].destinations[0].rate_limit", "N/s or N/m"},
		},
		{
			name:       "fair_by without concurrency",
			givenYAML:  strings.Replace(validConfig, "        max_attempts: 3\n", "        max_attempts: 3\n        fair_by: json:account\n", 1),
			expectText: []string{"sources[0].destinations[0].fair_by", "concurrency and rate_limit: set one"},
		},
		{
			name:       "fair_by that is no field",
			givenYAML:  strings.Replace(validConfig, "        max_attempts: 3\n", "        max_attempts: 3\n        concurrency: 4\n        fair_by: body-sha256\n", 1),
			expectText: []string{"sources[0].destinations[0].fair_by", "json:<path> or header:<Name>"},
		},
		{
			name:       "negative concurrency",
			givenYAML:  strings.Replace(validConfig, "        max_attempts: 3\n", "        max_attempts: 3\n        concurrency: -1\n", 1),
			expectText: []string{"sources[0].destinations[0].concurrency", "negative"},
		},
		{
			name:       "negative circuit failures",
			givenYAML:  strings.Replace(validConfig, "        max_attempts: 3\n", "        max_attempts: 3\n        circuit: {failures: -2}\n", 1),
			expectText: []string{"sources[0].destinations[0].circuit.failures", "negative"},
		},
		{
			name:       "unknown circuit key",
			givenYAML:  strings.Replace(validConfig, "        max_attempts: 3\n", "        max_attempts: 3\n        circuit: {failure: 3}\n", 1),
			expectText: []string{"sources[0].destinations[0].circuit.failure: unknown key"},
		},
		{
			name:       "a body limit that would overflow",
			givenYAML:  strings.Replace(validConfig, "lease: 1m", "lease: 1m\nmax_body_bytes: 9223372036854775807", 1),
			expectText: []string{"max_body_bytes", "between 1 and"},
		},
		{
			name:       "a recovery pass every nanosecond",
			givenYAML:  strings.Replace(validConfig, "lease: 1m", "lease: 1m\nworker:\n  recovery_interval: 1ns", 1),
			expectText: []string{"worker.recovery_interval", "at least 100ms"},
		},
		{
			name:       "a lease of weeks",
			givenYAML:  strings.Replace(validConfig, "lease: 1m", "lease: 1000h", 1),
			expectText: []string{"lease", "between 1s and 24h"},
		},
		{
			name:       "a replay window of a century",
			givenYAML:  strings.Replace(validConfig, "tolerance: 5m", "tolerance: 876000h", 1),
			expectText: []string{"sources[0].verify.tolerance", "at most 24h"},
		},
		{
			name:       "a secret with white space around it",
			givenYAML:  strings.Replace(validConfig, `secrets: ["s3cr3t"]`, `secrets: [" s3cr3t "]`, 1),
			expectText: []string{"sources[1].verify.secrets[0]", "white space"},
		},
		{
			name:       "absurd destination limits",
			givenYAML:  strings.Replace(validConfig, "        max_attempts: 3\n", "        max_attempts: 100000\n        concurrency: 10000000\n", 1),
			expectText: []string{"sources[0].destinations[0].max_attempts: must be at most 1000", "sources[0].destinations[0].concurrency: must be at most 100000"},
		},
		{
			name:       "a destination that is webhookd itself",
			givenYAML:  strings.Replace(validConfig, "https://ci.example.com/hook", "http://localhost:9999/admin/replay", 1),
			expectText: []string{"sources[1].destinations[0].url", "webhookd's own listen address"},
		},
		{
			name:       "a destination at the cloud's metadata address",
			givenYAML:  strings.Replace(validConfig, "https://ci.example.com/hook", "http://169.254.169.254/latest/meta-data/", 1),
			expectText: []string{"sources[1].destinations[0].url", "link-local", "allow_link_local_destinations"},
		},
		{
			name:       "bad redis url",
			givenYAML:  strings.Replace(validConfig, "redis://127.0.0.1:6379/0", "http://nope", 1),
			expectText: []string{"redis_url"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("w.yaml", []byte(tc.givenYAML), env(map[string]string{"STRIPE_SECRET": "whsec_topsecret"}))
			if err == nil {
				t.Fatal("expected an error")
			}
			for _, want := range tc.expectText {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "whsec_topsecret") || strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("error leaks a secret: %q", err)
			}
		})
	}
}

// TestParseConfigOrderHeaders: order fields may come from a header the
// scheme signs, or from any header once the operator says so.
func TestParseConfigOrderHeaders(t *testing.T) {
	t.Parallel()
	for name, yaml := range map[string]string{
		"signed header (slack's timestamp)": strings.Replace(validConfig, "      scheme: github\n      secrets: [\"s3cr3t\"]\n",
			"      scheme: slack\n      secrets: [\"s3cr3t\"]\n    order:\n      entity: json:event.channel\n      version: header:X-Slack-Request-Timestamp\n", 1),
		"unsigned header, opted in": strings.Replace(validConfig, "      secrets: [\"s3cr3t\"]\n",
			"      secrets: [\"s3cr3t\"]\n    order:\n      entity: json:repository.id\n      version: header:X-Version\n      allow_unsigned_header: true\n", 1),
	} {
		if _, err := Parse("w.yaml", []byte(yaml), env(nil)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestDuplicateContentWindowDefaults: the guard against copies under
// fresh ids is on (for the retention) where the id is not signed and no
// two distinct events share signed content (twilio; mailgun, adyen,
// razorpay and linear since issue 23), off where they can (github,
// shopify), and as configured when set.
func TestDuplicateContentWindowDefaults(t *testing.T) {
	t.Parallel()
	yaml := strings.Replace(validConfig, "  - name: gh\n", `  - name: sms
    verify: {scheme: twilio, secrets: [tok], public_url: "https://hooks.example.com/webhooks/sms"}
    destinations: [{name: app, url: "http://127.0.0.1:9000/sms"}]
  - name: sms_off
    verify: {scheme: twilio, secrets: [tok], public_url: "https://hooks.example.com/webhooks/sms_off"}
    duplicate_content_window: 0s
    destinations: [{name: app, url: "http://127.0.0.1:9000/sms"}]
  - name: shop
    verify: {scheme: shopify, secrets: [tok]}
    duplicate_content_window: 24h
    destinations: [{name: app, url: "http://127.0.0.1:9000/shop"}]
  - name: mg
    verify: {scheme: mailgun, secrets: [tok]}
    destinations: [{name: app, url: "http://127.0.0.1:9000/mg"}]
  - name: razor
    verify: {scheme: razorpay, secrets: [tok]}
    destinations: [{name: app, url: "http://127.0.0.1:9000/razor"}]
  - name: gh
`, 1)
	cfg, err := Parse("w.yaml", []byte(yaml), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	sources := cfg.Process.Sources.Gateway
	for name, want := range map[string]time.Duration{"sms": 48 * time.Hour, "sms_off": 0, "shop": 24 * time.Hour, "gh": 0, "stripe": 0,
		"mg": 48 * time.Hour, "razor": 48 * time.Hour} {
		if got := sources[name].ContentWindow; got != want {
			t.Errorf("%s: window %s, want %s", name, got, want)
		}
	}
}

func TestExampleConfigIsValid(t *testing.T) {
	t.Parallel()
	if _, err := Load("../webhookd.example.yaml"); err != nil {
		t.Fatal(err)
	}
}

// TestDestinationSteeringKeys: rate_limit, concurrency and circuit reach
// the destination as SPEC reads them.
func TestDestinationSteeringKeys(t *testing.T) {
	t.Parallel()
	yaml := strings.Replace(validConfig, "        max_attempts: 3\n",
		"        max_attempts: 3\n        rate_limit: 600/m\n        concurrency: 8\n        circuit: {failures: 0}\n", 1)
	cfg, err := Parse("w.yaml", []byte(yaml), env(map[string]string{"STRIPE_SECRET": "whsec_x", "SIGNING": signingSecret}))
	if err != nil {
		t.Fatal(err)
	}
	routes := cfg.Process.Sources.Routes
	d := routes["stripe"]["billing"]
	if d.Rate == nil || d.Rate.N != 600 || d.Rate.Period != time.Minute || d.Rate.String() != "600/m" {
		t.Errorf("rate %+v, want 600 a minute", d.Rate)
	}
	if d.Concurrency != 8 || !d.Circuit.Disabled || d.Circuit.Failures != 0 {
		t.Errorf("concurrency %d, circuit %+v; want 8 and off", d.Concurrency, d.Circuit)
	}
	if ci := routes["gh"]["ci"]; ci.Circuit.Failures != 20 || ci.Circuit.Cooldown != time.Minute || ci.Rate != nil || ci.Concurrency != 0 {
		t.Errorf("defaults: %+v, want the circuit on (20, 1m) and no limits", ci)
	}
}

// TestConfigErrorsSayWhere: every configuration error reads
// "<where>: <key>: <problem>", where is the file and line or the
// environment variable that set the value; an unset ${VAR} is named (a
// secret left out must not become an empty one) unless written with a
// default; several problems are all reported, one per line.
func TestConfigErrorsSayWhere(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		givenYAML  string
		givenEnv   map[string]string
		expectText []string
	}{
		{
			name:       "unset variable",
			givenYAML:  validConfig,
			givenEnv:   map[string]string{"STRIPE_SECRET": ""},
			expectText: []string{"w.yaml:5: admin_token: ${TOKEN} is not set in the environment"},
		},
		{
			name:       "an environment override that is wrong",
			givenYAML:  validConfig,
			givenEnv:   map[string]string{"DATABASE_URL": "mysql://db"},
			expectText: []string{"$DATABASE_URL (environment): database_url: must be a postgres:// URL"},
		},
		{
			name:       "a value of the wrong type",
			givenYAML:  strings.Replace(validConfig, "max_attempts: 3", "max_attempts: many", 1),
			expectText: []string{"w.yaml:21: sources[0].destinations[0].max_attempts: cannot unmarshal"},
		},
		{
			name:      "rules that do not compile",
			givenYAML: strings.Replace(validConfig, "max_attempts: 3", "max_attempts: 3\n        when: 'body.amount >'\n        transform: '{\"a\": nope}'", 1),
			expectText: []string{
				"w.yaml:22: sources[0].destinations[0].when: column 14: Syntax error",
				"w.yaml:23: sources[0].destinations[0].transform: column 7: undeclared reference to 'nope'",
			},
		},
		{
			name:       "a when that is no bool",
			givenYAML:  strings.Replace(validConfig, "max_attempts: 3", "max_attempts: 3\n        when: 'body.amount + 1 == 2 ? \"yes\" : \"no\"'", 1),
			expectText: []string{"w.yaml:22: sources[0].destinations[0].when: must be a bool, not string"},
		},
		{
			name:       "a duration deep in the file",
			givenYAML:  strings.Replace(validConfig, "timeout: 10s", "timeout: 10 seconds", 1),
			expectText: []string{`w.yaml:20: sources[0].destinations[0].timeout: "10 seconds" is not a duration`},
		},
		{
			name:      "several problems at once",
			givenYAML: strings.Replace(strings.Replace(validConfig, "timeout: 10s", "timeout: x", 1), "max_attempts: 3", "max_attempts: y", 1),
			expectText: []string{
				"w.yaml:20: sources[0].destinations[0].timeout:",
				"\nw.yaml:21: sources[0].destinations[0].max_attempts:",
			},
		},
		{
			name:       "a syntax error",
			givenYAML:  validConfig + "  - name: [\n",
			expectText: []string{"w.yaml:"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lookup := env(tc.givenEnv)
			if tc.name == "unset variable" {
				lookup = func(k string) (string, bool) {
					v, ok := map[string]string{"STRIPE_SECRET": "whsec_x", "SIGNING": signingSecret}[k]
					return v, ok
				}
			}
			_, err := Parse("w.yaml", []byte(tc.givenYAML), lookup)
			if err == nil {
				t.Fatal("expected an error")
			}
			for _, want := range tc.expectText {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			for line := range strings.SplitSeq(err.Error(), "\n") {
				if !configErrorLineRE.MatchString(line) {
					t.Errorf("error line %q is not <where>: <key>: <problem>", line)
				}
			}
		})
	}

	// ${VAR:-default}: the default when unset or empty, the value when set.
	yaml := strings.Replace(validConfig, "admin_token: ${TOKEN}", "admin_token: ${TOKEN:-fallback-token-0123456789}", 1)
	for given, want := range map[string]string{"": "fallback-token-0123456789", "set-token-0123456789": "set-token-0123456789"} {
		cfg, err := Parse("w.yaml", []byte(yaml), env(map[string]string{"TOKEN": given}))
		if err != nil {
			t.Errorf("TOKEN=%q: %v", given, err)
		} else if cfg.File.AdminToken != want {
			t.Errorf("TOKEN=%q: admin_token %q, want %q", given, cfg.File.AdminToken, want)
		}
	}
}

// configErrorLineRE is the one form of a configuration error line.
var configErrorLineRE = regexp.MustCompile(`^(\S+\.yaml(:\d+)?|\$[A-Z_]+ \(environment\)): (\S+: )?\S`)

// TestParseConfigAdminAccess: admin tokens are checked at load, each
// error naming its key (or WEBHOOKD_ADMIN_TOKEN) and never the token;
// tokenless admin needs its explicit unsafe key and is refused beside a
// token; valid tokens reach the process configuration by role.
func TestParseConfigAdminAccess(t *testing.T) {
	t.Parallel()
	const (
		tokA = "token-aaaaaaaaaaaaaaaa"
		tokB = "token-bbbbbbbbbbbbbbbb"
		tokR = "token-rrrrrrrrrrrrrrrr"
	)
	withAdmin := func(admin string) string {
		return strings.Replace(validConfig, "admin_token: ${TOKEN}\n", admin, 1)
	}
	for _, tc := range []struct {
		name       string
		givenYAML  string
		givenEnv   map[string]string
		expectText []string // empty: valid
		expectFull []string
		expectRO   []string
		expectMode bool // UnsafeTokenlessLoopback
	}{
		{name: "no token: admin off", givenYAML: withAdmin("")},
		{name: "admin_token", givenYAML: withAdmin("admin_token: " + tokA + "\n"), expectFull: []string{tokA}},
		{name: "rotation and read-only",
			givenYAML:  withAdmin("admin_token: " + tokA + "\nadmin:\n  tokens: [" + tokB + "]\n  read_only_tokens: [" + tokR + "]\n"),
			expectFull: []string{tokA, tokB}, expectRO: []string{tokR}},
		{name: "environment overrides admin_token",
			givenYAML: withAdmin("admin_token: " + tokA + "\n"), givenEnv: map[string]string{"WEBHOOKD_ADMIN_TOKEN": tokB},
			expectFull: []string{tokB}},
		{name: "read-only only", givenYAML: withAdmin("admin:\n  read_only_tokens: [" + tokR + "]\n"), expectRO: []string{tokR}},
		{name: "unsafe opt-in", givenYAML: withAdmin("admin:\n  unsafe_tokenless_loopback: true\n"), expectMode: true},
		{name: "short admin_token", givenYAML: withAdmin("admin_token: short-token\n"),
			expectText: []string{"w.yaml:5", "admin_token", "shorter than 16"}},
		{name: "short token from the environment", givenYAML: withAdmin(""), givenEnv: map[string]string{"WEBHOOKD_ADMIN_TOKEN": "short-token"},
			expectText: []string{"WEBHOOKD_ADMIN_TOKEN", "shorter than 16"}},
		{name: "empty list entry", givenYAML: withAdmin("admin:\n  tokens: [" + tokA + ", \"${UNSET:-}\"]\n"),
			expectText: []string{"admin.tokens[1]", "empty"}},
		{name: "white space around", givenYAML: withAdmin("admin:\n  read_only_tokens: [\" " + tokR + "\"]\n"),
			expectText: []string{"admin.read_only_tokens[0]", "white space"}},
		{name: "duplicate", givenYAML: withAdmin("admin_token: " + tokA + "\nadmin:\n  tokens: [" + tokB + ", " + tokA + "]\n"),
			expectText: []string{"admin.tokens[1]", "duplicates admin_token"}},
		{name: "in both lists", givenYAML: withAdmin("admin:\n  tokens: [" + tokA + "]\n  read_only_tokens: [" + tokB + ", " + tokA + "]\n"),
			expectText: []string{"admin.read_only_tokens[1]", "also listed as admin.tokens[0]", "either full or read-only"}},
		{name: "unsafe beside a token", givenYAML: withAdmin("admin_token: " + tokA + "\nadmin:\n  unsafe_tokenless_loopback: true\n"),
			expectText: []string{"admin.unsafe_tokenless_loopback", "admin_token", "cannot be combined"}},
		{name: "unsafe beside an environment token", givenYAML: withAdmin("admin:\n  unsafe_tokenless_loopback: true\n"),
			givenEnv:   map[string]string{"WEBHOOKD_ADMIN_TOKEN": tokA},
			expectText: []string{"admin.unsafe_tokenless_loopback", "WEBHOOKD_ADMIN_TOKEN", "cannot be combined"}},
		{name: "unsafe beside a read-only token", givenYAML: withAdmin("admin:\n  unsafe_tokenless_loopback: true\n  read_only_tokens: [" + tokR + "]\n"),
			expectText: []string{"admin.unsafe_tokenless_loopback", "admin.read_only_tokens[0]", "cannot be combined"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := map[string]string{"STRIPE_SECRET": "whsec_x", "SIGNING": signingSecret}
			for k, v := range tc.givenEnv {
				e[k] = v
			}
			cfg, err := Parse("w.yaml", []byte(tc.givenYAML), env(e))
			if len(tc.expectText) > 0 {
				if err == nil {
					t.Fatal("expected an error")
				}
				for _, want := range tc.expectText {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not mention %q", err, want)
					}
				}
				for _, tok := range []string{tokA, tokB, tokR, "short-token"} {
					if strings.Contains(err.Error(), tok) {
						t.Errorf("error %q holds a token", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			pc := cfg.Process
			if !slices.Equal(pc.Admin.Tokens, tc.expectFull) || !slices.Equal(pc.Admin.ReadOnlyTokens, tc.expectRO) ||
				pc.Admin.UnsafeTokenlessLoopback != tc.expectMode {
				t.Errorf("admin config %+v, want full %v, read-only %v, unsafe %v", pc.Admin, tc.expectFull, tc.expectRO, tc.expectMode)
			}
		})
	}
}

// TestEventTypeFilterAndForwardKeys: event_type, filter and forward_headers
// reach the gateway's source and the worker's routes.
func TestEventTypeFilterAndForwardKeys(t *testing.T) {
	t.Parallel()
	yaml := strings.Replace(validConfig, "url: https://ci.example.com/hook",
		"url: https://ci.example.com/hook\n        filter: [\"pull_request\", \"check_*\"]\n        forward_headers: [X-Request-Id]", 1)
	yaml = strings.Replace(yaml, "    destinations:\n      - name: ci", "    event_type: json:action\n    destinations:\n      - name: ci", 1)
	cfg, err := Parse("w.yaml", []byte(yaml), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	ci := cfg.Process.Sources.Routes["gh"]["ci"]
	if !ci.Filter.Wants("check_run") || ci.Filter.Wants("push") || ci.Filter.Wants("") {
		t.Errorf("filter %v: wants check_run, not push nor an untyped event", ci.Filter)
	}
	if !slices.Contains(ci.ForwardHeaders, "X-Request-Id") || !slices.Contains(ci.ForwardHeaders, "X-Github-Event") {
		t.Errorf("forwarded headers %v: want the scheme's and X-Request-Id", ci.ForwardHeaders)
	}
	gh := cfg.Process.Sources.Gateway["gh"]
	if gh.EventType == nil || gh.EventType.String() != "json:action" {
		t.Errorf("gh source: event type %v, want json:action", gh.EventType)
	}
	if got := gh.PlanFunc("push"); len(got) != 0 {
		t.Errorf("gh's plan for a push: %v, want none (ci filters it out)", got)
	}
	if got := gh.PlanFunc("check_suite"); !slices.Equal(got, []string{"ci"}) {
		t.Errorf("gh's plan for a check_suite: %v, want [ci]", got)
	}
}

// TestEveryProblemOfAFileAtOnce: one run reports an unknown key (with the
// key it probably meant), a value that is no duration, an unknown scheme
// (with the scheme it probably meant), a bad URL and a reference to a
// secret that is not set, each once, at its own line, in file order, and
// never a key's path twice.
func TestEveryProblemOfAFileAtOnce(t *testing.T) {
	t.Parallel()
	yaml := strings.NewReplacer(
		"lease: 1m", "lease: soon",
		"retention: 48h", "retension: 48h",
		"scheme: github", "scheme: githib",
		"https://ci.example.com/hook", "ci.example.com/hook",
		"timeout: 10s", "timeot: 10s",
	).Replace(validConfig)
	_, err := Parse("w.yaml", []byte(yaml), env(map[string]string{}))
	if err == nil {
		t.Fatal("expected errors")
	}
	want := []string{
		"w.yaml:6: retension: unknown key (did you mean retention?)",
		`w.yaml:7: lease: "soon" is not a duration`,
		"w.yaml:20: sources[0].destinations[0].timeot: unknown key (did you mean timeout?)",
		`w.yaml:25: sources[1].verify.scheme: unknown scheme "githib"`,
		"(did you mean github?)",
		"w.yaml:29: sources[1].destinations[0].url: must be an absolute URL: http(s)://, nats://, amqp:// or kafka://",
	}
	got := err.Error()
	last := -1
	for _, w := range want {
		i := strings.Index(got, w)
		if i < 0 {
			t.Errorf("errors do not say %q:\n%s", w, got)
			continue
		}
		if i < last {
			t.Errorf("%q is out of the file's order:\n%s", w, got)
		}
		last = i
	}
	lines := strings.Split(got, "\n")
	if len(lines) != 5 {
		t.Errorf("%d problems reported, want 5:\n%s", len(lines), got)
	}
	for _, l := range lines {
		if strings.Contains(l, "verify: verify.") || strings.Count(l, "sources[") > 1 {
			t.Errorf("a key's path is written twice: %q", l)
		}
	}
}

// TestLinkLocalDestinationsOptIn: a metadata address is accepted once the
// operator opts in; an unwise value (a short secret, a long tolerance)
// loads, with a located warning.
func TestLinkLocalDestinationsOptInAndWarnings(t *testing.T) {
	t.Parallel()
	yaml := strings.Replace(validConfig, "https://ci.example.com/hook", "http://169.254.169.254/latest/meta-data/", 1)
	yaml = strings.Replace(yaml, "lease: 1m", "lease: 1m\nallow_link_local_destinations: true", 1)
	yaml = strings.Replace(yaml, "tolerance: 5m", "tolerance: 1h", 1)
	cfg, err := Parse("w.yaml", []byte(yaml), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range cfg.Warnings {
		got = append(got, w.Error())
	}
	want := []string{
		"w.yaml:14: sources[0].verify.tolerance: 1h0m0s lets a captured delivery be replayed for that long",
		"w.yaml:13: sources[0].verify.secrets[0]: shorter than 16 bytes", // whsec_x
		"w.yaml:13: sources[0].verify.secrets[1]: shorter than 16 bytes", // whsec_old
		"w.yaml:27: sources[1].verify.secrets[0]: shorter than 16 bytes", // s3cr3t
	}
	if len(got) != len(want) {
		t.Fatalf("warnings %q, want %d", got, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("warning %q, want it to start %q", got[i], w)
		}
	}
}
