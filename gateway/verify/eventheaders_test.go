package verify

import (
	"net/http"
	"testing"
)

func TestEventHeaders(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name         string
		givenScheme  string
		givenHeader  http.Header
		expectWebhID string
		expectWebhTS string
	}{
		{
			name:         "svix sender: the signed svix-id stands as webhook-id, over an unsigned one",
			givenScheme:  SchemeStandard,
			givenHeader:  http.Header{"Svix-Id": {"msg_signed"}, "Svix-Timestamp": {"1700000000"}, "Svix-Signature": {"v1,x"}, "Webhook-Id": {"msg_injected"}, "Webhook-Timestamp": {"9999999999"}},
			expectWebhID: "msg_signed",
			expectWebhTS: "1700000000",
		},
		{
			name:         "standard sender: unchanged",
			givenScheme:  SchemeStandard,
			givenHeader:  http.Header{"Webhook-Id": {"msg_1"}, "Webhook-Timestamp": {"1700000000"}, "Webhook-Signature": {"v1,x"}, "Svix-Id": {"other"}, "Svix-Timestamp": {"1"}},
			expectWebhID: "msg_1",
			expectWebhTS: "1700000000",
		},
		{
			name:         "other scheme: unchanged",
			givenScheme:  SchemeStripe,
			givenHeader:  http.Header{"Svix-Id": {"msg_signed"}, "Svix-Signature": {"v1,x"}},
			expectWebhID: "",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			before := tc.givenHeader.Get("Webhook-Id")
			got := EventHeaders(tc.givenScheme, tc.givenHeader)
			if id := got.Get("Webhook-Id"); id != tc.expectWebhID {
				t.Errorf("Webhook-Id = %q, want %q", id, tc.expectWebhID)
			}
			if ts := got.Get("Webhook-Timestamp"); ts != tc.expectWebhTS {
				t.Errorf("Webhook-Timestamp = %q, want %q", ts, tc.expectWebhTS)
			}
			if tc.givenHeader.Get("Webhook-Id") != before {
				t.Error("the request's own headers were changed")
			}
		})
	}
}

func TestSignsHeader(t *testing.T) {
	t.Parallel()
	hmacTS := Config{Scheme: SchemeHMACSHA256, Secrets: []string{"s"}, TimestampHeader: "X-Acme-Timestamp"}
	cases := []struct {
		givenConfig Config
		givenHeader string
		expect      bool
	}{
		{Config{Scheme: SchemeStandard}, "webhook-id", true},
		{Config{Scheme: SchemeStandard}, "Webhook-Timestamp", true},
		// Signed only when the sender uses Svix's names; EventHeaders
		// puts them in webhook-*.
		{Config{Scheme: SchemeStandard}, "svix-id", false},
		{Config{Scheme: SchemeStandard}, "svix-timestamp", false},
		{Config{Scheme: SchemeSlack}, "x-slack-request-timestamp", true},
		{Config{Scheme: SchemeSlack}, "X-Slack-Retry-Num", false},
		{hmacTS, "x-acme-timestamp", true},
		{hmacTS, "X-Acme-Delivery", false},
		{Config{Scheme: SchemeHMACSHA256, Secrets: []string{"s"}}, "X-Webhook-Timestamp", false},
		{Config{Scheme: SchemeGitHub}, "X-GitHub-Delivery", false},
		{Config{Scheme: SchemeShopify}, "X-Shopify-Triggered-At", false},
		{Config{Scheme: SchemeShopify}, "X-Shopify-Webhook-Id", false},
		{Config{Scheme: SchemeTwilio}, "I-Twilio-Idempotency-Token", false},
		{Config{Scheme: SchemeStripe}, "Stripe-Signature", false},
		{Config{Scheme: SchemeNone}, "X-Version", false},
	}
	for _, tc := range cases {
		if got := tc.givenConfig.SignsHeader(tc.givenHeader); got != tc.expect {
			t.Errorf("scheme %s, header %s: SignsHeader = %v, want %v", tc.givenConfig.Scheme, tc.givenHeader, got, tc.expect)
		}
	}
}
