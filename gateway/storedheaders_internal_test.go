package gateway

import (
	"strings"
	"testing"

	"github.com/webhookd/webhookd/gateway/verify"
)

// TestSendersHeadersAreNotCredentials: no scheme's forwarded headers or
// id header is taken for a credential of the hop (a forwarded header is
// forwarded from what is stored, and a credential is not stored), so
// widening the credential words and parts (issue 23, L2) drops none of
// them. A sender added later with such a header fails here.
func TestSendersHeadersAreNotCredentials(t *testing.T) {
	t.Parallel()
	for _, scheme := range verify.Schemes {
		d := verify.SchemeDefaults(scheme)
		names := append([]string{}, d.ForwardedHeaders...)
		for _, spec := range []string{d.EventID, d.EventType} {
			if h, ok := strings.CutPrefix(spec, "header:"); ok {
				names = append(names, h)
			}
		}
		for _, name := range names {
			if sensitive(strings.ToLower(name)) {
				t.Errorf("%s: header %s is taken for a credential and would not be stored", scheme, name)
			}
		}
	}
}
