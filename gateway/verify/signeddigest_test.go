package verify

import (
	"bytes"
	"net/http"
	"net/url"
	"testing"
)

// TestSignedDigest: a copy of a signed request has the digest of the
// original whatever its unsigned headers say, and any change to what is
// signed (body, signed timestamp, signed id) changes it.
func TestSignedDigest(t *testing.T) {
	t.Parallel()
	for _, f := range fixtures() {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			v := f.verifier(t)
			orig := f.signWith(t, 0, "", f.body, testNow)
			d := SignedDigest(v, orig)
			if len(d) != 32 {
				t.Fatalf("digest %x, want 32 bytes", d)
			}
			// A copy whose unsigned headers differ: another event id.
			cp := Request{Header: orig.Header.Clone(), Body: orig.Body, RawQuery: orig.RawQuery}
			for _, h := range []string{"X-Github-Delivery", "X-Shopify-Webhook-Id", "I-Twilio-Idempotency-Token", "X-Request-Id"} {
				cp.Header.Set(h, "fresh-"+h)
			}
			if err := v.Verify(cp, testNow); err != nil {
				t.Fatalf("copy does not verify: %v", err)
			}
			if got := SignedDigest(v, cp); !bytes.Equal(got, d) {
				t.Errorf("a copy with other unsigned headers has another digest")
			}
			// The same content signed with another secret is the same content.
			if got := SignedDigest(v, f.signWith(t, 1, "", f.body, testNow)); !bytes.Equal(got, d) {
				t.Errorf("the same content signed with the rotated secret has another digest")
			}
			other := bytes.Replace(f.body, []byte("1"), []byte("2"), 1)
			if got := SignedDigest(v, f.signWith(t, 0, "", other, testNow)); bytes.Equal(got, d) {
				t.Errorf("another body has the same digest")
			}
			if f.timestamped {
				if got := SignedDigest(v, f.signWith(t, 0, "", f.body, testNow.Add(1e9))); bytes.Equal(got, d) {
					t.Errorf("another signed timestamp has the same digest")
				}
			}
		})
	}

	t.Run("twilio form parameters reordered and re-escaped", func(t *testing.T) {
		t.Parallel()
		f := fixtureNamed(t, "twilio-form")
		v := f.verifier(t)
		orig := f.signWith(t, 0, "", f.body, testNow)
		params, _ := url.ParseQuery(string(f.body))
		reordered := Request{Header: orig.Header, Body: []byte(params.Encode() + "&"), RawQuery: orig.RawQuery}
		if bytes.Equal(reordered.Body, orig.Body) {
			t.Fatal("test body not changed")
		}
		if err := v.Verify(reordered, testNow); err != nil {
			t.Fatalf("reordered copy does not verify: %v", err)
		}
		if !bytes.Equal(SignedDigest(v, reordered), SignedDigest(v, orig)) {
			t.Error("reordered form parameters have another digest: a copy would pass as new")
		}
	})

	t.Run("standard: the signed id is part of it", func(t *testing.T) {
		t.Parallel()
		f := fixtureNamed(t, "standard")
		v := f.verifier(t)
		a := f.signWith(t, 0, "", f.body, testNow)
		c := f.cfg
		c.Secrets = c.Secrets[:1]
		h, _, err := Sign(c, f.body, testNow, "msg_other")
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(SignedDigest(v, a), SignedDigest(v, Request{Header: h, Body: f.body})) {
			t.Error("another signed id has the same digest")
		}
	})

	t.Run("none signs nothing", func(t *testing.T) {
		t.Parallel()
		v, err := New(Config{Scheme: SchemeNone, AllowUnsigned: true})
		if err != nil {
			t.Fatal(err)
		}
		if d := SignedDigest(v, Request{Header: http.Header{}, Body: []byte("x")}); d != nil {
			t.Errorf("digest %x for scheme none, want nil", d)
		}
	})
}

func fixtureNamed(t *testing.T, name string) fixture {
	t.Helper()
	for _, f := range fixtures() {
		if f.name == name {
			return f
		}
	}
	t.Fatalf("no fixture %s", name)
	return fixture{}
}
