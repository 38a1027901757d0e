package verify

import (
	"bytes"
	"net/url"
	"testing"
)

// BenchmarkVerify measures the hot path per scheme with a 1 KiB body and
// two configured secrets, the valid signature made with the second one
// (the worst case during a rotation).
func BenchmarkVerify(b *testing.B) {
	jsonBody := []byte(`{"id":"evt_1","pad":"` + string(bytes.Repeat([]byte("x"), 1024-22)) + `"}`)
	formBody := []byte(url.Values{"Body": {string(bytes.Repeat([]byte("y"), 1000))}, "From": {"+14158675309"}, "MessageSid": {"SM1"}}.Encode())
	for _, fx := range fixtures() {
		body := jsonBody
		if fx.name == "twilio-form" {
			body = formBody
		}
		r := fx.signWith(b, 1, "", body, testNow)
		v := fx.verifier(b)
		b.Run(fx.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if err := v.Verify(r, testNow); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("none", func(b *testing.B) {
		v, err := New(Config{Scheme: SchemeNone, AllowUnsigned: true})
		if err != nil {
			b.Fatal(err)
		}
		r := Request{Body: jsonBody}
		b.ReportAllocs()
		for b.Loop() {
			if err := v.Verify(r, testNow); err != nil {
				b.Fatal(err)
			}
		}
	})
}
