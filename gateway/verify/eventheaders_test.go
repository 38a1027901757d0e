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
	}{
		{
			name:         "svix sender: the signed svix-id stands as webhook-id, over an unsigned one",
			givenScheme:  SchemeStandard,
			givenHeader:  http.Header{"Svix-Id": {"msg_signed"}, "Svix-Signature": {"v1,x"}, "Webhook-Id": {"msg_injected"}},
			expectWebhID: "msg_signed",
		},
		{
			name:         "standard sender: unchanged",
			givenScheme:  SchemeStandard,
			givenHeader:  http.Header{"Webhook-Id": {"msg_1"}, "Webhook-Signature": {"v1,x"}, "Svix-Id": {"other"}},
			expectWebhID: "msg_1",
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
			if tc.givenHeader.Get("Webhook-Id") != before {
				t.Error("the request's own headers were changed")
			}
		})
	}
}
