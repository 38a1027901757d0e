package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
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

// TestStoredHeadersEncodeAsJSON: the stored headers are one JSON object
// that decodes to the headers kept, names in order and every value as it
// came (quotes, backslashes, tabs, markup, non-ASCII, several values),
// with U+FFFD for bytes that are not UTF-8: what encoding/json wrote
// before storedHeaders wrote it directly.
func TestStoredHeadersEncodeAsJSON(t *testing.T) {
	t.Parallel()
	h := http.Header{
		"X-Quote":     {`say "hi" \ back\slash`},
		"X-Tab":       {"a\tb"},
		"X-Markup":    {"</script><b>&amp;"},
		"User-Agent":  {"Grüße/1.0 ☃"},
		"X-Bad-Utf8":  {"ok\xffend"},
		"X-Many":      {"one", "two", ""},
		"X-Empty":     {},
		"Accept":      {"*/*"},
		"X-Signature": {"sig-value"},
		"X-Api-Key":   {"a credential"},
	}
	got, err := storedHeaders(h, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(got) {
		t.Fatalf("not JSON: %s", got)
	}
	want := map[string][]string{}
	for name, values := range h {
		switch name {
		case "X-Api-Key":
			continue
		case "X-Signature":
			values = []string{"[masked: 9 bytes]"}
		case "X-Bad-Utf8":
			values = []string{"ok\uFFFDend"}
		}
		want[name] = values
	}
	var decoded map[string][]string
	if err := json.Unmarshal(got, &decoded); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(decoded, want) {
		t.Errorf("decoded %q\nwant    %q", decoded, want)
	}
	var names []string
	dec := json.NewDecoder(bytes.NewReader(got))
	dec.Token() // {
	for dec.More() {
		name, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, name.(string))
		var skip []string
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.IsSorted(names) {
		t.Errorf("names not in order: %q", names)
	}
}
