package verify

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// isSentinel reports whether err wraps exactly the verification sentinels.
func isSentinel(err error) bool {
	return errors.Is(err, ErrMissingSignature) || errors.Is(err, ErrMalformedSignature) ||
		errors.Is(err, ErrSignatureMismatch) || errors.Is(err, ErrTimestampOutsideTolerance)
}

// fuzzHeader runs a verifier over an arbitrary value of one header (with
// the other headers of a valid request) and checks it neither panics nor
// accepts it, unless it is the valid value itself.
func fuzzHeader(t *testing.T, f fixture, header, value string) {
	v := f.verifier(t)
	r := f.signWith(t, 0, "", f.body, testNow)
	good := r.Header.Get(header)
	r.Header = r.Header.Clone()
	r.Header.Set(header, value)
	err := v.Verify(r, testNow)
	if err == nil && value != good {
		// Only a value equivalent to the valid one may pass.
		if !equivalentHeader(header, value, good) {
			t.Fatalf("%s: accepted forged %s %q", f.name, header, value)
		}
	}
	if err != nil && !isSentinel(err) {
		t.Fatalf("%s: error %v wraps no sentinel", f.name, err)
	}
}

// equivalentHeader allows the encodings that legitimately decode to the
// same signature: hex is case-insensitive, and header lists may carry
// extra items next to the valid one.
func equivalentHeader(header, value, good string) bool {
	return strings.Contains(strings.ToLower(value), strings.ToLower(strings.TrimPrefix(strings.TrimPrefix(good, "v1,"), "sha256="))) ||
		strings.Contains(strings.ToLower(value), strings.ToLower(good[strings.LastIndexByte(good, '=')+1:]))
}

func fixtureByName(name string) fixture {
	for _, f := range fixtures() {
		if f.name == name {
			return f
		}
	}
	panic(name)
}

func FuzzStripeHeader(f *testing.F) {
	fx := fixtureByName("stripe")
	good := fx.signWith(f, 0, "", fx.body, testNow).Header.Get("Stripe-Signature")
	for _, s := range append(fx.malformed, good, "t=1700000000,v1=", "t=1700000000,v1=aa,v0=bb", "t=1700000000,v1="+strings.Repeat("0", 64), ",,,", "t=99999999999999999999,v1=a") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		ts, n, err := parseStripeHeader(value)
		if err == nil && (!allDigits(ts) || n < 0) {
			t.Fatalf("parseStripeHeader(%q) = %q, %d", value, ts, n)
		}
		if err != nil && !errors.Is(err, ErrMalformedSignature) {
			t.Fatalf("parseStripeHeader error %v", err)
		}
		fuzzHeader(t, fx, "Stripe-Signature", value)
	})
}

func FuzzStandardHeader(f *testing.F) {
	fx := fixtureByName("standard")
	good := fx.signWith(f, 0, "", fx.body, testNow).Header.Get("Webhook-Signature")
	for _, s := range append(fx.malformed, good, "v1a,abc "+good, "v2,x v1,y", "v1,"+strings.Repeat("A", 44), " ") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		n, err := parseStandardHeader("webhook-signature", value)
		if err != nil && (!errors.Is(err, ErrMalformedSignature) || n != 0) {
			t.Fatalf("parseStandardHeader error %v", err)
		}
		fuzzHeader(t, fx, "Webhook-Signature", value)
	})
}

func FuzzGitHubHeader(f *testing.F) {
	fx := fixtureByName("github")
	for _, s := range append(fx.malformed, fx.signWith(f, 0, "", fx.body, testNow).Header.Get("X-Hub-Signature-256")) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		var dst [sha256.Size]byte
		if err := parseGitHubHeader(&dst, value); err != nil && !errors.Is(err, ErrMalformedSignature) {
			t.Fatal(err)
		}
		fuzzHeader(t, fx, "X-Hub-Signature-256", value)
	})
}

func FuzzShopifyHeader(f *testing.F) {
	fx := fixtureByName("shopify")
	for _, s := range append(fx.malformed, fx.signWith(f, 0, "", fx.body, testNow).Header.Get("X-Shopify-Hmac-Sha256")) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		var dst [sha256.Size]byte
		if err := parseShopifyHeader(&dst, value); err != nil && !errors.Is(err, ErrMalformedSignature) {
			t.Fatal(err)
		}
		fuzzHeader(t, fx, "X-Shopify-Hmac-Sha256", value)
	})
}

func FuzzSlackHeader(f *testing.F) {
	fx := fixtureByName("slack")
	for _, s := range append(fx.malformed, fx.signWith(f, 0, "", fx.body, testNow).Header.Get("X-Slack-Signature"), slackDocSignature) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		var dst [sha256.Size]byte
		if err := parseV0Header(&dst, slackHeader, value); err != nil && !errors.Is(err, ErrMalformedSignature) {
			t.Fatal(err)
		}
		fuzzHeader(t, fx, "X-Slack-Signature", value)
	})
}

func FuzzTwilioHeader(f *testing.F) {
	fx := fixtureByName("twilio-form")
	for _, s := range append(fx.malformed, fx.signWith(f, 0, "", fx.body, testNow).Header.Get("X-Twilio-Signature"), "RSOYDt4T1cUTdK1PDd93/VVr8B8=") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		var dst [sha1.Size]byte
		if err := parseTwilioHeader(&dst, value); err != nil && !errors.Is(err, ErrMalformedSignature) {
			t.Fatal(err)
		}
		fuzzHeader(t, fx, "X-Twilio-Signature", value)
	})
}

func FuzzGenericHeader(f *testing.F) {
	fx := fixtureByName("hmac-sha256")
	for _, s := range append(fx.malformed, fx.signWith(f, 0, "", fx.body, testNow).Header.Get("X-Webhook-Signature")) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		var dst [sha256.Size]byte
		if err := parseGenericSignature(&dst, "X-Webhook-Signature", "sha256=", false, value); err != nil && !errors.Is(err, ErrMalformedSignature) {
			t.Fatal(err)
		}
		fuzzHeader(t, fx, "X-Webhook-Signature", value)
	})
}

// FuzzSignedContentTemplate checks the hmac-sha256 template parser.
func FuzzSignedContentTemplate(f *testing.F) {
	for _, s := range []string{"{body}", "{timestamp}.{body}", "v1:{timestamp}:{body}", "{", "}{body}{", "{ts}{body}", "{{body}}", "{}",
		"{method}{url}{body}{timestamp_ms}", "{header:Twitch-Eventsub-Message-Id}{timestamp}{body}", "{header:}{body}", "{header:a b}{body}",
		"{timestamp}{timestamp_ms}{body}", "{url}{url}{body}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tmpl string) {
		segs, err := parseTemplate(tmpl, true)
		if err != nil {
			return
		}
		bodies, stamps := 0, 0
		for _, s := range segs {
			switch s.kind {
			case segBody:
				bodies++
			case segTimestamp:
				stamps++
			case segHeader:
				if len(s.lit) == 0 || strings.ContainsAny(string(s.lit), " {}:") {
					t.Fatalf("template %q accepted header placeholder %q", tmpl, s.lit)
				}
			}
		}
		if bodies != 1 || stamps > 1 {
			t.Fatalf("template %q accepted with %d bodies, %d timestamps", tmpl, bodies, stamps)
		}
	})
}

// FuzzVerify signs a fuzzed body with every scheme, checks the signature
// verifies, and that changing the body, the timestamp or the secret makes
// it fail.
func FuzzVerify(f *testing.F) {
	f.Add([]byte(`{"id":"evt_1"}`), uint16(3), byte(1), int64(1), "x")
	f.Add([]byte(`{"a":[1,2,3]}`), uint16(0), byte(0x80), int64(-7), "rotated")
	f.Add([]byte("a=1&b=2"), uint16(2), byte(2), int64(0), "")
	f.Add([]byte(`{"x":true}`), uint16(9), byte(0xff), int64(299), "A")
	f.Add([]byte(""), uint16(0), byte(1), int64(-300), "0")
	f.Add([]byte("a=%zz"), uint16(1), byte(1), int64(5), "y")
	fxs := fixtures()
	verifiers := make([]Verifier, len(fxs))
	for i, fx := range fxs {
		verifiers[i] = fx.verifier(f)
	}
	f.Fuzz(func(t *testing.T, body []byte, pos uint16, flip byte, tsDelta int64, secretSuffix string) {
		for i, fx := range fxs {
			if fx.cfg.Scheme == SchemeTwilio && !twilioSignable(body) {
				// Twilio signs JSON or form bodies only; the other
				// schemes still take this body.
				if _, _, err := Sign(fx.cfg, body, testNow, "msg_fuzz"); err == nil {
					t.Fatalf("%s: signed a body that is neither JSON nor a form: %q", fx.name, body)
				}
				continue
			}
			fuzzVerifyScheme(t, fx, verifiers[i], body, pos, flip, tsDelta, secretSuffix)
		}
	})
}

// twilioSignable reports whether Twilio's scheme can sign body: a JSON
// body (signed through bodySHA256) or a form-encoded one.
func twilioSignable(body []byte) bool {
	if len(body) > 0 && json.Valid(body) {
		return true
	}
	_, err := url.ParseQuery(string(body))
	return err == nil
}

// fuzzVerifyScheme is FuzzVerify's check of one scheme.
func fuzzVerifyScheme(t *testing.T, fx fixture, v Verifier, body []byte, pos uint16, flip byte, tsDelta int64, secretSuffix string) {
	t.Helper()
	c := fx.cfg
	c.Secrets = c.Secrets[:1]
	h, q, err := Sign(c, body, testNow, "msg_fuzz")
	if err != nil {
		t.Fatalf("%s: sign: %v", fx.name, err)
	}
	good := Request{Header: h, Body: body, RawQuery: q}
	if err := v.Verify(good, testNow); err != nil {
		t.Fatalf("%s: valid signature rejected: %v", fx.name, err)
	}

	// Body mutation.
	mutated := append([]byte(nil), body...)
	if flip == 0 {
		flip = 1
	}
	if len(mutated) == 0 {
		mutated = append(mutated, flip)
	} else {
		mutated[int(pos)%len(mutated)] ^= flip
	}
	err = v.Verify(Request{Header: h, Body: mutated, RawQuery: q}, testNow)
	if err == nil && !(strings.HasPrefix(fx.name, "twilio") && sameForm(body, mutated, q)) {
		t.Fatalf("%s: mutated body %q accepted", fx.name, mutated)
	}
	if err != nil && !isSentinel(err) {
		t.Fatalf("%s: %v wraps no sentinel", fx.name, err)
	}

	// Secret mutation.
	c.Secrets = []string{mutateSecret(fx, c.Secrets[0], secretSuffix)}
	h2, q2, err := Sign(c, body, testNow, "msg_fuzz")
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(Request{Header: h2, Body: body, RawQuery: q2}, testNow); !errors.Is(err, ErrSignatureMismatch) {
		t.Fatalf("%s: other secret: %v", fx.name, err)
	}

	// Timestamp mutation, kept inside the tolerance so only the
	// signature can reject it.
	if fx.timestamped {
		d := tsDelta % 300
		if d == 0 {
			d = 1
		}
		ts := strconv.FormatInt(testNow.Unix()+d, 10)
		h3 := h.Clone()
		if fx.tsHeader != "" {
			h3.Set(fx.tsHeader, ts)
		} else {
			sig := h3.Get("Stripe-Signature")
			h3.Set("Stripe-Signature", "t="+ts+sig[strings.IndexByte(sig, ','):])
		}
		if err := v.Verify(Request{Header: h3, Body: body, RawQuery: q}, testNow); !errors.Is(err, ErrSignatureMismatch) {
			t.Fatalf("%s: shifted timestamp: %v", fx.name, err)
		}
	}
}

// mutateSecret returns a different secret of the same kind.
func mutateSecret(fx fixture, s, suffix string) string {
	if fx.cfg.Scheme == SchemeStandard {
		k, _ := decodeStandardSecret(s)
		k = append(append([]byte(nil), k...), suffix...)
		k[0] ^= 1
		return "whsec_" + b64Strict.EncodeToString(k)
	}
	// HMAC pads short keys with zero bytes, so "key" and "key\x00" are
	// the same key (a property of HMAC, not a forgery); append something
	// that is not only NULs. A secret may not end with white space (the
	// configuration refuses a copy-and-paste slip): end it with a letter.
	if strings.Trim(suffix, "\x00") == "" || strings.TrimRightFunc(suffix, unicode.IsSpace) != suffix {
		suffix += "x"
	}
	return s + suffix
}

// sameForm reports whether two bodies carry the same form parameters, in
// which case Twilio's scheme (which signs the decoded parameters, not the
// bytes) rightly accepts both: "a=b+c" and "a=b%20c" are one request.
func sameForm(a, b []byte, rawQuery string) bool {
	if q, _ := url.ParseQuery(rawQuery); q.Get("bodySHA256") != "" {
		return bytes.Equal(a, b)
	}
	pa, errA := url.ParseQuery(string(a))
	pb, errB := url.ParseQuery(string(b))
	if errA != nil || errB != nil {
		return false
	}
	return formSuffix(pa) == formSuffix(pb) || reflect.DeepEqual(pa, pb)
}

func TestFuzzHelpersSanity(t *testing.T) {
	t.Parallel()
	if !sameForm([]byte("a=b+c"), []byte("a=b%20c"), "") {
		t.Fatal("sameForm")
	}
}
