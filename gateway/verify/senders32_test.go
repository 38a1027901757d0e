package verify_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/gateway/eventid"
	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/testkit/sendertest"
)

// TestSenders checks each sender of issue 32 against a signer written
// from its provider's documentation or SDK (sendertest): a realistic
// delivery verifies under the current and the rotated secret; the wrong
// secret, an altered body, a stale or future timestamp (where signed)
// and each missing header are refused with the right error; the event
// id and type come out of the delivery as the scheme's defaults say; and
// what Sign produces verifies too.
func TestSenders(t *testing.T) {
	t.Parallel()
	now := time.Now()
	if len(verify.Schemes) < 50+2 { // 50 senders, hmac-sha256/hmac and none aside
		t.Errorf("%d schemes, want at least 50 named senders", len(verify.Schemes))
	}
	for _, s := range sendertest.Senders() {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			v, err := verify.New(s.Config)
			if err != nil {
				t.Fatal(err)
			}
			withSecret := func(secret string) verify.Config {
				c := s.Config
				c.Secrets = []string{secret}
				return c
			}
			req := func(secret string, body []byte, at time.Time, id string) verify.Request {
				return verify.Request{Method: http.MethodPost, Header: s.Sign(t, withSecret(secret), body, at, id), Body: body}
			}
			const id = "evt_0001"
			body := s.Body(id)
			for i, secret := range s.Config.Secrets {
				if err := v.Verify(req(secret, body, now, id), now); err != nil {
					t.Errorf("secret #%d: the sender's signature is refused: %v", i+1, err)
				}
			}
			expect := func(name string, r verify.Request, want error, header string) {
				t.Helper()
				err := v.Verify(r, now)
				if !errors.Is(err, want) {
					t.Errorf("%s: Verify = %v, want %v", name, err, want)
				}
				if err != nil && header != "" && !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(header)) {
					t.Errorf("%s: error %q does not name %s", name, err, header)
				}
				for _, secret := range append(s.Config.Secrets, s.WrongSecret) {
					if err != nil && strings.Contains(err.Error(), secret) {
						t.Errorf("%s: error %q holds a secret", name, err)
					}
				}
			}
			expect("wrong secret", req(s.WrongSecret, body, now, id), verify.ErrSignatureMismatch, "")
			if !s.TokenOnly {
				altered := []byte(strings.Replace(string(body), "1000", "9000", 1))
				r := req(s.Config.Secrets[0], body, now, id)
				r.Body = altered
				expect("altered body", r, verify.ErrSignatureMismatch, "")
			}
			if s.Timestamped {
				expect("stale", req(s.Config.Secrets[0], body, now.Add(-time.Hour), id), verify.ErrTimestampOutsideTolerance, "")
				expect("future", req(s.Config.Secrets[0], body, now.Add(time.Hour), id), verify.ErrTimestampOutsideTolerance, "")
			}
			for _, name := range s.Required {
				r := req(s.Config.Secrets[0], body, now, id)
				r.Header.Del(name)
				expect("missing "+name, r, verify.ErrMissingSignature, name)
			}
			for _, m := range s.Malformed {
				r := req(s.Config.Secrets[0], body, now, id)
				r.Header.Set(m[0], m[1])
				expect("malformed "+m[0]+" "+m[1], r, verify.ErrMalformedSignature, m[0])
			}

			// The scheme's defaults find the id and type in the delivery.
			r := req(s.Config.Secrets[0], body, now, id)
			d := verify.SchemeDefaults(s.Name)
			wantID := id
			if s.ExpectID != nil {
				wantID = s.ExpectID(body, id)
			}
			x, err := eventid.Parse(d.EventID)
			if err != nil {
				t.Fatalf("default event id %q: %v", d.EventID, err)
			}
			h := verify.EventHeaders(s.Name, r.Header)
			if got, err := x.Extract(h, body); err != nil || got != wantID {
				t.Errorf("event id (%s) = %q, %v; want %q", d.EventID, got, err, wantID)
			}
			if s.ExpectType == "" && d.EventType != "" {
				t.Errorf("event type %q, want none", d.EventType)
			}
			if s.ExpectType != "" {
				x, err := eventid.Parse(d.EventType)
				if err != nil {
					t.Fatalf("default event type %q: %v", d.EventType, err)
				}
				if got, err := x.Extract(h, body); err != nil || got != s.ExpectType {
					t.Errorf("event type (%s) = %q, %v; want %q", d.EventType, got, err, s.ExpectType)
				}
			}

			// verify.Sign signs as the sender does.
			c := withSecret(s.Config.Secrets[1])
			if s.Name == verify.SchemeTelnyx {
				c.SigningKey = sendertestSeed(t, c.Secrets[0])
			}
			sh, _, err := verify.Sign(c, body, now, id)
			if err != nil {
				t.Fatalf("Sign: %v", err)
			}
			if err := v.Verify(verify.Request{Method: http.MethodPost, Header: sh, Body: body}, now); err != nil {
				t.Errorf("Sign's signature is refused: %v", err)
			}
		})
	}
}
