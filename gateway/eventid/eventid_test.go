package eventid

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/webhookd/webhookd/internal/textfield"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		givenSpec string
		expectErr bool
	}{
		{"json:id", false},
		{"json:data.object.id", false},
		{"json:event_id", false},
		{"header:X-GitHub-Delivery", false},
		{"header:webhook-id", false},
		{"body-sha256", false},
		{"json:", true},
		{"json: id", true},
		{"header:", true},
		{"header:Bad Name", true},
		{"header:X:Y", true},
		{"Body-SHA256", true},
		{"id", true},
		{"", true},
		{"xml:id", true},
	} {
		e, err := Parse(tc.givenSpec)
		if (err != nil) != tc.expectErr {
			t.Errorf("Parse(%q) error = %v, want error %v", tc.givenSpec, err, tc.expectErr)
			continue
		}
		if err != nil && !strings.Contains(err.Error(), `"`+tc.givenSpec+`"`) {
			t.Errorf("Parse(%q) error %q does not name the spec", tc.givenSpec, err)
		}
		if err == nil && e.String() != tc.givenSpec {
			t.Errorf("String() = %q", e.String())
		}
	}
}

func TestExtract(t *testing.T) {
	t.Parallel()
	stripe := []byte(`{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","created":1686089970,"data":{"object":{"id":"in_1","n":12.50,"big":12345678901234567890,"neg":-3,"arr":[1],"obj":{},"nul":null,"t":true,"empty":""}},"esc":"a\u00e9b","ctl":"a\u0001b","long":"` + strings.Repeat("x", 256) + `","max":"` + strings.Repeat("y", 255) + `"}`)
	hdr := http.Header{}
	hdr.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	hdr.Set("Webhook-Id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	hdr.Set("X-Empty", "")
	hdr.Set("X-Ctl", "a\tb")
	hdr["X-Multi"] = []string{"first", "second"}
	for _, tc := range []struct {
		spec      string
		body      []byte
		expectID  string
		expectErr error
	}{
		{"json:id", stripe, "evt_1NG8Du2eZvKYlo2CUI79vXWy", nil},
		{"json:data.object.id", stripe, "in_1", nil},
		{"json:created", stripe, "1686089970", nil},
		{"json:data.object.n", stripe, "12.50", nil},
		{"json:data.object.big", stripe, "12345678901234567890", nil},
		{"json:data.object.neg", stripe, "-3", nil},
		{"json:esc", stripe, "a\u00e9b", nil},
		{"json:max", stripe, strings.Repeat("y", 255), nil},
		{"json:data.object.arr", stripe, "", ErrMissing},
		{"json:data.object.obj", stripe, "", ErrMissing},
		{"json:data.object.nul", stripe, "", ErrMissing},
		{"json:data.object.t", stripe, "", ErrMissing},
		{"json:data.object.empty", stripe, "", ErrMissing},
		{"json:nope", stripe, "", ErrMissing},
		{"json:ctl", stripe, "", ErrInvalid},
		{"json:long", stripe, "", ErrInvalid},
		{"json:id", []byte(`{"id":"evt_1"`), "", ErrUnparseable},
		{"json:id", []byte(`token=abc&id=1`), "", ErrUnparseable},
		{"json:id", nil, "", ErrUnparseable},
		{"json:id", []byte(`{"id":"a"} {"id":"b"}`), "", ErrUnparseable},
		{"json:id", []byte(`["x"]`), "", ErrMissing},
		{"header:X-GitHub-Delivery", nil, "72d3162e-cc78-11e3-81ab-4c9367dc0958", nil},
		{"header:webhook-id", []byte("not json"), "msg_p5jXN8AQM9LWM0D4loKWxJek", nil},
		{"header:X-Multi", nil, "first", nil},
		{"header:X-Empty", nil, "", ErrMissing},
		{"header:X-Absent", nil, "", ErrMissing},
		{"header:X-Ctl", nil, "", ErrInvalid},
		{"body-sha256", []byte("Hello, World!"), "dffd6021bb2bd5b0af676290809ec3a53191dd81c7f70a4b28688a362182986f", nil},
		{"body-sha256", nil, "", ErrMissing},
	} {
		e, err := Parse(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		id, err := e.Extract(hdr, tc.body)
		if !errors.Is(err, tc.expectErr) || id != tc.expectID {
			t.Errorf("%s on %.40q: Extract = %q, %v; want %q, %v", tc.spec, tc.body, id, err, tc.expectID, tc.expectErr)
		}
	}
	if _, err := (Extractor{}).Extract(hdr, stripe); err == nil {
		t.Error("zero Extractor extracted something")
	}
}

func TestExtractRefusesInvalidIDs(t *testing.T) {
	t.Parallel()
	e, err := Parse("header:X-Id")
	if err != nil {
		t.Fatal(err)
	}
	for id, ok := range map[string]bool{
		"evt_1":                  true,
		"a b":                    true,
		"日本語":                    true,
		"a\x7fb":                 false,
		"a\nb":                   false,
		"a\u0085b":               false, // C1 control
		"a\xffb":                 false, // invalid UTF-8
		strings.Repeat("z", 255): true,
		strings.Repeat("z", 256): false,
		// Issue 23, I5: accepted before.
		"   ":          false, // only spaces (json:; a header's are trimmed to nothing)
		"\u00a0\u200b": false, // no-break and zero-width spaces
		"a\u2028b":     false, // line separator
		"evt\u202e1":   false, // right-to-left override
		"evt\u2066x":   false, // left-to-right isolate
	} {
		got, err := e.Extract(http.Header{"X-Id": {id}}, nil)
		if (err == nil) != ok || err != nil && !errors.Is(err, ErrInvalid) || err == nil && got != id {
			t.Errorf("Extract of %q = %q, %v; want ok %v", id, got, err, ok)
		}
	}
}

// TestExtractRefusesInvisibleIDs: a JSON id of only white space, or one
// holding a line separator or a bidirectional override, is refused
// (issue 23, I5): it names nothing an operator can read, or shows as
// another id.
func TestExtractRefusesInvisibleIDs(t *testing.T) {
	t.Parallel()
	e, err := Parse("json:id")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"   ", `\t`, "\u00a0\u200b", "a\u2028b", "evt\u202e1", "evt\u2066x"} {
		if got, err := e.Extract(nil, []byte(`{"id":"`+id+`"}`)); !errors.Is(err, ErrInvalid) {
			t.Errorf("Extract of %q = %q, %v; want %v", id, got, err, ErrInvalid)
		}
	}
	if got, err := e.Extract(nil, []byte(`{"id":" evt 1 "}`)); err != nil || got != " evt 1 " {
		t.Errorf("an id with spaces around text: %q, %v; want it as sent", got, err)
	}
}

func FuzzExtract(f *testing.F) {
	f.Add("json:id", "", []byte(`{"id":"evt_1"}`))
	f.Add("json:data.object.id", "", []byte(`{"data":{"object":{"id":42}}}`))
	f.Add("json:a.#", "", []byte(`{"a":[1,2]}`))
	f.Add("json:a|@reverse", "", []byte(`{"a":[1,2]}`))
	f.Add("header:X-Id", "abc", []byte(nil))
	f.Add("header:X-Id", "a\x00b", []byte(nil))
	f.Add("body-sha256", "", []byte("x"))
	f.Add("json:id", "", []byte(`{"id":"\ud800"}`))
	f.Fuzz(func(t *testing.T, spec, headerValue string, body []byte) {
		e, err := Parse(spec)
		if err != nil {
			return
		}
		h := http.Header{}
		h.Set("X-Id", headerValue)
		id, err := e.Extract(h, body)
		if err != nil {
			if !errors.Is(err, ErrMissing) && !errors.Is(err, ErrUnparseable) && !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			if id != "" {
				t.Fatalf("id %q with error", id)
			}
			return
		}
		if id == "" || len(id) > MaxLen || !utf8.ValidString(id) || textfield.CheckLine(id, MaxLen) != nil {
			t.Fatalf("Extract returned bad id %q", id)
		}
		again, err2 := e.Extract(h, body)
		if again != id || err2 != nil {
			t.Fatalf("Extract not deterministic: %q vs %q", id, again)
		}
	})
}

func BenchmarkExtract(b *testing.B) {
	body := []byte(`{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","api_version":"2024-06-20","created":1686089970,"data":{"object":{"id":"cus_NffrFeUfNV2Hib","object":"customer","address":null,"balance":0,"created":1680893993,"currency":null,"email":"jennyrosen@example.com","invoice_prefix":"0759376C","invoice_settings":{"custom_fields":null,"default_payment_method":null,"footer":null},"livemode":false,"metadata":{},"name":"Jenny Rosen","phone":null,"preferred_locales":[],"shipping":null,"tax_exempt":"none"}},"livemode":false,"pending_webhooks":0,"request":{"id":"req_1","idempotency_key":"c5d9f0b0-1d7f-4d43-9a8d-4f7d0e0b6c51"},"type":"customer.created","padding":"` + strings.Repeat("p", 300) + `"}`)
	h := http.Header{}
	h.Set("X-Github-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	for _, spec := range []string{"json:id", "json:data.object.id", "header:X-GitHub-Delivery", "body-sha256"} {
		e, err := Parse(spec)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(spec, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := e.Extract(h, body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestHeader(t *testing.T) {
	t.Parallel()
	for spec, want := range map[string]string{"header:x-github-delivery": "X-Github-Delivery", "json:id": "", "body-sha256": ""} {
		e, err := Parse(spec)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := e.Header(); got != want || ok != (want != "") {
			t.Errorf("%s: Header() = %q, %v; want %q", spec, got, ok, want)
		}
	}
}

// A Body read by several json: specs is checked once: the first spec's
// verdict is the others'. The second body below is valid JSON marked as
// already found invalid, so a spec that checked it again would find the
// id.
func TestExtractFromChecksTheBodyOnce(t *testing.T) {
	t.Parallel()
	id, _ := Parse("json:id")
	typ, _ := Parse("json:type")
	body := NewBody([]byte(`{"id":"evt_1","type":"charge.succeeded"}`))
	gotID, errID := id.ExtractFrom(nil, &body)
	gotType, errType := typ.ExtractFrom(nil, &body)
	if gotID != "evt_1" || gotType != "charge.succeeded" || errID != nil || errType != nil {
		t.Fatalf("got %q, %v and %q, %v; want evt_1 and charge.succeeded", gotID, errID, gotType, errType)
	}
	if !body.checked || !body.valid {
		t.Fatalf("body checked %v, valid %v after two reads; want both", body.checked, body.valid)
	}

	judged := Body{raw: []byte(`{"id":"evt_2"}`), checked: true, valid: false}
	if got, err := id.ExtractFrom(nil, &judged); !errors.Is(err, ErrUnparseable) {
		t.Fatalf("got %q, %v from a body already found invalid; want ErrUnparseable without a second check", got, err)
	}

	deep := NewBody([]byte(strings.Repeat("[", 200) + strings.Repeat("]", 200)))
	for _, e := range []Extractor{id, typ} {
		if _, err := e.ExtractFrom(nil, &deep); !errors.Is(err, ErrUnparseable) {
			t.Fatalf("%s on a body nested 200 deep: %v, want ErrUnparseable", e, err)
		}
	}
}
