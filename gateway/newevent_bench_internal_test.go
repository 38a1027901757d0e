package gateway

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/gateway/verify"
)

// BenchmarkNewEvent is the event a Stripe delivery of 1 KiB records:
// the scheme's id and type read from the body, the headers kept, the
// body stored. It is the per-request work between verifying and
// recording.
func BenchmarkNewEvent(b *testing.B) {
	src, err := NewSource(SourceSpec{Verify: verify.Config{Scheme: verify.SchemeStripe, Secrets: []string{"whsec_bench"}}}, SourceOptions{})
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(fmt.Sprintf(`{"id":"evt_1","object":"event","type":"charge.succeeded","created":1733400000,"data":{"object":{"id":"ch_1","description":%q}}}`,
		strings.Repeat("x", 900)))
	h := http.Header{"Content-Type": {"application/json"}, "Stripe-Signature": {"t=1,v1=00"}, "User-Agent": {"Stripe/1.0"}}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		ev, err := newEvent("stripe", src, h, body)
		if err != nil || ev.ExternalID != "evt_1" || ev.EventType != "charge.succeeded" {
			b.Fatalf("newEvent: %+v, %v", ev, err)
		}
	}
}
