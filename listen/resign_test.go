package listen

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/webhookd/webhookd/gateway/admin"
	"github.com/webhookd/webhookd/gateway/verify"
)

// TestResignEveryScheme: for every scheme that signs with a shared
// secret, what resign makes for the local URL verifies with that secret
// under webhookd's own verifier, configured as the developer's app would
// be (twilio and square: the local URL). hmac-sha256's settings travel
// with the scheme. The schemes that sign with a private key, or inside a
// body only the sender can fill (msgraph), say so (errCannotResign); an
// unsigned source gets no signature.
func TestResignEveryScheme(t *testing.T) {
	t.Parallel()
	const forwardTo = "http://localhost:3000/webhooks"
	now := time.Now()
	prefix := "v1="
	for _, scheme := range verify.Schemes {
		t.Run(scheme, func(t *testing.T) {
			t.Parallel()
			signing := admin.SigningJSON{Scheme: scheme}
			secret := "dev-secret-0123456789"
			body := []byte(`{"id":"evt_1","type":"invoice.paid","event_id":"evt_1","data":{"object":{"id":"o_1"}}}`)
			switch scheme {
			case verify.SchemeStandard, verify.SchemeClerk, verify.SchemeResend:
				secret = "whsec_ZGV2ZWxvcG1lbnQtc2VjcmV0"
			case verify.SchemePostmark, verify.SchemePipedrive:
				secret = "dev:development-password"
			case verify.SchemeAdyen:
				secret = "44782def547aaa06c910c43932b1eb0c71fc68d9d0c057550c48ec2acf6ba056"
				body = []byte(`{"live":"false","notificationItems":[{"NotificationRequestItem":{"amount":{"currency":"EUR","value":1000},"eventCode":"AUTHORISATION","merchantAccountCode":"Demo","merchantReference":"r1","pspReference":"p1","success":"true"}}]}`)
			case verify.SchemeLinear:
				body = fmt.Appendf(nil, `{"action":"create","type":"Issue","data":{"id":"i_1"},"webhookTimestamp":%d}`, now.UnixMilli())
			case verify.SchemeHMACSHA256:
				signing.Header, signing.Encoding, signing.Prefix = "X-Dev-Signature", "base64", &prefix
				signing.TimestampHeader, signing.SignedContent = "X-Dev-Timestamp", "{timestamp}:{body}"
			}
			r, err := resign(signing, secret, body, now, "evt_1", forwardTo)
			switch scheme {
			case verify.SchemeDiscord, verify.SchemeSendGrid, verify.SchemeMSGraph, verify.SchemeTelnyx, verify.SchemeSNS:
				if !errors.Is(err, errCannotResign) {
					t.Fatalf("resign = %v, want errCannotResign", err)
				}
				return
			case verify.SchemeNone:
				if err != nil || len(r.header) != 0 || string(r.body) != string(body) {
					t.Fatalf("resign = %+v, %v; want the body as it is, no header", r, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("resign: %v", err)
			}
			cfg := signing.VerifyConfig()
			cfg.Secrets = []string{secret}
			if cfg.SignsURL() {
				cfg.PublicURL = forwardTo
			}
			if scheme == verify.SchemeMeta {
				cfg.VerifyToken = "app-verify-token"
			}
			v, err := verify.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			h := r.header.Clone()
			if h.Get("Content-Type") == "" {
				h.Set("Content-Type", "application/json")
			}
			if err := v.Verify(verify.Request{Method: http.MethodPost, Header: h, Body: r.body, RawQuery: r.rawQuery}, now); err != nil {
				t.Fatalf("the development secret does not verify what resign made: %v (headers %v)", err, r.header)
			}
			other, err := verify.New(func() verify.Config { c := cfg; c.Secrets = []string{otherSecret(scheme)}; return c }())
			if err != nil {
				t.Fatal(err)
			}
			if err := other.Verify(verify.Request{Method: http.MethodPost, Header: h, Body: r.body, RawQuery: r.rawQuery}, now); err == nil {
				t.Fatalf("another secret verifies what resign made")
			}
		})
	}
}

// otherSecret is a secret of the scheme's form other than the one signed
// with.
func otherSecret(scheme string) string {
	switch scheme {
	case verify.SchemeStandard, verify.SchemeClerk, verify.SchemeResend:
		return "whsec_b3RoZXItc2VjcmV0"
	case verify.SchemePostmark, verify.SchemePipedrive:
		return "dev:another-password"
	case verify.SchemeAdyen:
		return "55782def547aaa06c910c43932b1eb0c71fc68d9d0c057550c48ec2acf6ba056"
	}
	return "another-secret-0123456789"
}
