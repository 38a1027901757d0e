package jobs_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/webhookd/webhookd/gateway/verify"
)

// BenchmarkSignCall is a destination call's signing (signing_secret):
// "rebuilt per call" is what the worker did until issue 24 (verify.Sign:
// the scheme validated and built, the secret decoded, an HMAC pool made
// for every call, so nothing was ever reused); "built once" is the
// Signer a Destination holds since.
func BenchmarkSignCall(b *testing.B) {
	cfg := verify.Config{Scheme: verify.SchemeStandard, Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}
	body := bytes.Repeat([]byte("x"), 1024)
	now := time.Unix(1700000000, 0)
	b.Run("rebuilt per call", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := verify.Sign(cfg, body, now, "src:dst:evt_1"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("built once", func(b *testing.B) {
		s, err := verify.NewSigner(cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := s.Sign(body, now, "src:dst:evt_1"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
