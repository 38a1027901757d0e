package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
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
		SchemeSquare:   {EventID: "json:event_id", EventType: "json:type"},
		SchemeMailgun:  {EventID: "json:event-data.id", EventType: "json:event-data.event", ContentGuard: true},
		SchemeAdyen: {EventID: "body-sha256", EventType: "json:notificationItems.0.NotificationRequestItem.eventCode", ContentGuard: true,
			Respond: &Response{Status: 200, ContentType: "text/plain; charset=utf-8", Body: "[accepted]"}},
		SchemePaddle:   {EventID: "json:event_id", EventType: "json:event_type"},
		SchemeRazorpay: {EventID: "header:X-Razorpay-Event-Id", EventType: "json:event", ForwardedHeaders: []string{"X-Razorpay-Event-Id"}, ContentGuard: true},
		SchemeLinear:   {EventID: "header:Linear-Delivery", EventType: "json:type", ForwardedHeaders: []string{"Linear-Delivery", "Linear-Event"}, ContentGuard: true},
		SchemeTwilio:   {EventID: "header:I-Twilio-Idempotency-Token", ContentGuard: true},
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
		{Config{Scheme: SchemeSquare, Secrets: []string{"k"}}, "verify.public_url: required for scheme square"},
		{Config{Scheme: SchemeSquare, Secrets: []string{"k"}, PublicURL: "/webhooks/square"}, "verify.public_url: want an absolute http(s) URL"},
		{Config{Scheme: SchemePaddle, Secrets: []string{"k"}, PublicURL: "https://x/y"}, "verify.public_url: only used by schemes twilio, square"},
		{Config{Scheme: SchemeLinear}, "verify.secrets: required for scheme linear"},
		{Config{Scheme: SchemeRazorpay, Secrets: []string{"k"}, Header: "X-Sig"}, "verify.header: only used by scheme hmac-sha256"},
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

// TestSenderTolerances checks the senders' own windows: Paddle's 5 s
// (Paddle-Signature ts) and Linear's minute (the body's
// webhookTimestamp), both ways, and that verify.tolerance overrides them.
func TestSenderTolerances(t *testing.T) {
	t.Parallel()
	paddle := func(tol time.Duration, at time.Time) error {
		cfg := Config{Scheme: SchemePaddle, Secrets: []string{"pdl"}, Tolerance: tol}
		body := []byte(`{"event_id":"evt_1"}`)
		h, _, err := Sign(cfg, body, at, "")
		if err != nil {
			t.Fatal(err)
		}
		v, _ := New(cfg)
		return v.Verify(Request{Header: h, Body: body}, testNow)
	}
	linear := func(tol time.Duration, at time.Time) error {
		cfg := Config{Scheme: SchemeLinear, Secrets: []string{"lin"}, Tolerance: tol}
		body := fmt.Appendf(nil, `{"type":"Issue","webhookTimestamp":%d}`, at.UnixMilli())
		h, _, err := Sign(cfg, body, at, "")
		if err != nil {
			t.Fatal(err)
		}
		v, _ := New(cfg)
		return v.Verify(Request{Header: h, Body: body}, testNow)
	}
	for _, tc := range []struct {
		name      string
		verify    func(time.Duration, time.Time) error
		tol       time.Duration
		at        time.Time
		expectErr error
	}{
		{"paddle 4s old", paddle, 0, testNow.Add(-4 * time.Second), nil},
		{"paddle 6s old", paddle, 0, testNow.Add(-6 * time.Second), ErrTimestampOutsideTolerance},
		{"paddle 6s ahead", paddle, 0, testNow.Add(6 * time.Second), ErrTimestampOutsideTolerance},
		{"paddle 6s old, tolerance 1m", paddle, time.Minute, testNow.Add(-6 * time.Second), nil},
		{"linear 59s old", linear, 0, testNow.Add(-59 * time.Second), nil},
		{"linear 61s old", linear, 0, testNow.Add(-61 * time.Second), ErrTimestampOutsideTolerance},
		{"linear 61s ahead", linear, 0, testNow.Add(61 * time.Second), ErrTimestampOutsideTolerance},
		{"linear 61s old, tolerance 2m", linear, 2 * time.Minute, testNow.Add(-61 * time.Second), nil},
	} {
		if err := tc.verify(tc.tol, tc.at); !errors.Is(err, tc.expectErr) || tc.expectErr == nil && err != nil {
			t.Errorf("%s: Verify = %v, want %v", tc.name, err, tc.expectErr)
		}
	}
	v, _ := New(Config{Scheme: SchemeLinear, Secrets: []string{"lin"}})
	for body, want := range map[string]error{
		`{"type":"Issue"}`:                        ErrMissingSignature,
		`{"type":"Issue","webhookTimestamp":"1"}`: ErrMalformedSignature,
		`{"type":"Issue","webhookTimestamp":1.5}`: ErrMalformedSignature,
	} {
		h, _, _ := Sign(Config{Scheme: SchemeLinear, Secrets: []string{"lin"}}, []byte(body), testNow, "")
		if err := v.Verify(Request{Header: h, Body: []byte(body)}, testNow); !errors.Is(err, want) || !strings.Contains(err.Error(), "webhookTimestamp") {
			t.Errorf("linear %s: Verify = %v, want %v naming webhookTimestamp", body, err, want)
		}
	}
}

// TestPaddleRotation: while Paddle rotates a secret it sends one h1 per
// secret; any h1 matching any configured secret verifies.
func TestPaddleRotation(t *testing.T) {
	t.Parallel()
	body := []byte(`{"event_id":"evt_1"}`)
	ts := strconv.FormatInt(testNow.Unix(), 10)
	h1 := func(secret string) string {
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(ts + ":"))
		m.Write(body)
		return hex.EncodeToString(m.Sum(nil))
	}
	v, _ := New(Config{Scheme: SchemePaddle, Secrets: []string{"new-secret"}})
	for header, want := range map[string]error{
		"ts=" + ts + ";h1=" + h1("old-secret") + ";h1=" + h1("new-secret"): nil,
		"ts=" + ts + ";h1=" + h1("new-secret") + ";h1=" + h1("old-secret"): nil,
		"ts=" + ts + ";h1=" + h1("old-secret"):                             ErrSignatureMismatch,
		"h1=" + h1("new-secret") + ";ts=" + ts:                             nil,
		"ts=" + ts:                                                         ErrMalformedSignature,
		"ts=" + ts + ";h1=" + h1("new-secret")[:10]:                        ErrMalformedSignature,
	} {
		h := http.Header{}
		h.Set("Paddle-Signature", header)
		if err := v.Verify(Request{Header: h, Body: body}, testNow); !errors.Is(err, want) || want == nil && err != nil {
			t.Errorf("%s: Verify = %v, want %v", header, err, want)
		}
	}
}
