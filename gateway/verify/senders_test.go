package verify

import (
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// TestSenderDefaults checks the defaults table for the senders of issue
// 15: the event id, the event type and the forwarded headers.
func TestSenderDefaults(t *testing.T) {
	t.Parallel()
	for scheme, want := range map[string]Defaults{
		SchemeMeta:     {EventID: "body-sha256", EventType: "json:object"},
		SchemeZoom:     {EventID: "body-sha256", EventType: "json:event"},
		SchemeDiscord:  {EventID: "body-sha256", EventType: "json:event.type"},
		SchemeTelegram: {EventID: "json:update_id"},
		SchemeSendGrid: {EventID: "body-sha256"},
		SchemeMSGraph:  {EventID: "body-sha256", EventType: "json:value.0.changeType"},
		SchemeGitLab: {EventID: "header:Idempotency-Key", EventType: "header:X-Gitlab-Event",
			ForwardedHeaders: []string{"X-Gitlab-Event", "X-Gitlab-Event-UUID", "X-Gitlab-Webhook-UUID", "X-Gitlab-Instance"}},
	} {
		if got := SchemeDefaults(scheme); !reflect.DeepEqual(got, want) {
			t.Errorf("SchemeDefaults(%s) = %+v, want %+v", scheme, got, want)
		}
	}
}

// TestSenderConfigErrors checks that each new scheme's configuration
// errors name their key.
func TestSenderConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg       Config
		expectKey string
	}{
		{Config{Scheme: SchemeMeta, Secrets: []string{"s"}}, "verify.verify_token: required"},
		{Config{Scheme: SchemeMeta, VerifyToken: "t"}, "verify.secrets: required"},
		{Config{Scheme: SchemeGitHub, Secrets: []string{"s"}, VerifyToken: "t"}, "verify.verify_token: only used by scheme meta"},
		{Config{Scheme: SchemeTelegram, Secrets: []string{"has space"}}, "verify.secrets[0]: Telegram's secret_token is"},
		{Config{Scheme: SchemeTelegram, Secrets: []string{"ok", strings.Repeat("a", 257)}}, "verify.secrets[1]: Telegram's secret_token is"},
		{Config{Scheme: SchemeGitLab, Secrets: []string{""}}, "verify.secrets[0]: empty"},
		{Config{Scheme: SchemeSendGrid, Secrets: []string{"not base64"}}, "verify.secrets[0]: want the verification key SendGrid shows"},
		{Config{Scheme: SchemeSendGrid, Secrets: []string{"c2hvcnQ="}}, "verify.secrets[0]: not an ECDSA P-256 public key"},
		{Config{Scheme: SchemeDiscord, Secrets: []string{"not-hex"}}, "verify.secrets[0]: want the application's public key"},
		{Config{Scheme: SchemeDiscord, Secrets: []string{strings.Repeat("ab", 31)}}, "verify.secrets[0]: want the application's public key"},
	} {
		err := tc.cfg.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), tc.expectKey) {
			t.Errorf("%s %+v: Validate = %v, want %q…", tc.cfg.Scheme, tc.cfg, err, tc.expectKey)
		}
	}
}

// TestMetaHandshake covers the subscribe GET's parsing: only a GET with
// hub.mode is a handshake; a wrong token never answers the challenge.
func TestMetaHandshake(t *testing.T) {
	t.Parallel()
	v, err := New(Config{Scheme: SchemeMeta, Secrets: []string{"app-secret"}, VerifyToken: "vt"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, query string
		expectOK      bool
		expectErr     error
	}{
		{http.MethodGet, "hub.mode=subscribe&hub.verify_token=vt&hub.challenge=42", true, nil},
		{http.MethodGet, "hub.mode=subscribe&hub.verify_token=vT&hub.challenge=42", false, ErrHandshakeRefused},
		{http.MethodGet, "hub.mode=subscribe&hub.verify_token=&hub.challenge=42", false, ErrHandshakeRefused},
		{http.MethodGet, "hub.mode=subscribe&hub.verify_token=vt", false, ErrHandshakeRefused},
		{http.MethodGet, "hub.mode=x&hub.verify_token=vt&hub.challenge=42", false, ErrHandshakeRefused},
		{http.MethodGet, "", false, nil},
		{http.MethodGet, "%zz", false, nil},
		{http.MethodPost, "hub.mode=subscribe&hub.verify_token=vt&hub.challenge=42", false, nil},
	} {
		a, ok, err := Handshake(v, Request{Method: tc.method, RawQuery: tc.query, Header: http.Header{}}, testNow)
		if ok != tc.expectOK || !errors.Is(err, tc.expectErr) || (tc.expectErr == nil && err != nil) {
			t.Errorf("%s ?%s: ok %v err %v, want %v %v", tc.method, tc.query, ok, err, tc.expectOK, tc.expectErr)
		}
		if ok && (string(a.Body) != "42" || a.Status != http.StatusOK || !strings.HasPrefix(a.ContentType, "text/plain")) {
			t.Errorf("answer %+v", a)
		}
	}
}

// TestTokenSchemes covers telegram and gitlab: the token, compared with
// every configured one (rotation), is all they check.
func TestTokenSchemes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ scheme, header string }{
		{SchemeTelegram, "X-Telegram-Bot-Api-Secret-Token"},
		{SchemeGitLab, "X-Gitlab-Token"},
	} {
		v, err := New(Config{Scheme: tc.scheme, Secrets: []string{"old-token", "new-token"}})
		if err != nil {
			t.Fatal(err)
		}
		for value, want := range map[string]error{
			"old-token": nil, "new-token": nil, "": ErrMissingSignature,
			"old-token ": ErrSignatureMismatch, "old": ErrSignatureMismatch, "Old-token": ErrSignatureMismatch,
		} {
			h := http.Header{}
			h.Set(tc.header, value)
			err := v.Verify(Request{Header: h, Body: []byte(`{}`)}, testNow)
			if !errors.Is(err, want) || want == nil && err != nil {
				t.Errorf("%s %q: Verify = %v, want %v", tc.scheme, value, err, want)
			}
			if err != nil && (!strings.Contains(err.Error(), tc.header) || strings.Contains(err.Error(), "old-token")) {
				t.Errorf("%s: error %q must name %s and no token", tc.scheme, err, tc.header)
			}
		}
	}
}
