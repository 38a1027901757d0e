package config

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDestinationCredentialKeys: auth.oauth2, tls and retry reach the
// destination as written, the secret from the environment; a tls: file
// that cannot be read is an error naming the file and where it was
// configured, never quoting a credential.
func TestDestinationCredentialKeys(t *testing.T) {
	t.Parallel()
	keys := `        max_attempts: 3
        auth:
          oauth2: {token_url: "https://auth.example.com/token", client_id: webhookd, client_secret: "${OAUTH_SECRET}", scopes: [a, b]}
        retry:
          schedule: [10s, 1m]
          retry_on: [408, 409, 5xx]
`
	yaml := strings.Replace(validConfig, "        max_attempts: 3\n", keys, 1)
	vars := env(map[string]string{"OAUTH_SECRET": "oauth-client-secret-42"})
	cfg, err := Parse("w.yaml", []byte(yaml), vars)
	if err != nil {
		t.Fatal(err)
	}
	d := cfg.Process.Sources.Routes["stripe"]["billing"]
	if d.Auth == nil || len(d.Retry.Schedule) != 2 || d.Retry.Schedule[1] != time.Minute || !d.Retry.RetryOn[409] || !d.Retry.RetryOn[500] {
		t.Errorf("destination %+v: want oauth2 auth and the retry policy", d)
	}

	missing := filepath.Join(t.TempDir(), "ca.pem")
	bad := strings.Replace(yaml, "        retry:\n", "        tls: {ca: "+missing+"}\n        retry:\n", 1)
	_, err = Parse("w.yaml", []byte(bad), vars)
	if err == nil || !strings.Contains(err.Error(), "w.yaml:") ||
		!strings.Contains(err.Error(), "sources[0].destinations[0].tls.ca: cannot read "+missing+": no such file or directory") {
		t.Fatalf("a missing CA file: %v", err)
	}
	if strings.Contains(err.Error(), "oauth-client-secret-42") {
		t.Errorf("the error quotes the client secret: %v", err)
	}
}
