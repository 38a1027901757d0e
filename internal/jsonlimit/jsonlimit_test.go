package jsonlimit_test

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/internal/jsonlimit"
)

func TestValid(t *testing.T) {
	t.Parallel()
	deep := func(n int) []byte {
		return []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
	}
	for _, tc := range []struct {
		name   string
		given  []byte
		expect bool
	}{
		{"object", []byte(`{"id":"evt_1","data":{"object":{"id":"pi_1"}}}`), true},
		{"at the limit", deep(jsonlimit.MaxDepth), true},
		{"one past the limit", deep(jsonlimit.MaxDepth + 1), false},
		{"a megabyte of brackets", bytes.Repeat([]byte("["), 1<<20), false},
		{"objects past the limit", []byte(strings.Repeat(`{"a":`, jsonlimit.MaxDepth+1) + "1" + strings.Repeat("}", jsonlimit.MaxDepth+1)), false},
		{"brackets inside strings nest nothing", []byte(`{"s":"` + strings.Repeat("[", 1000) + `"}`), true},
		{"an escaped quote does not end the string", []byte(`{"s":"\"` + strings.Repeat("[", 1000) + `"}`), true},
		{"shallow but not JSON", []byte(`{"id":`), false},
		{"empty", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := jsonlimit.Valid(tc.given); got != tc.expect {
				t.Errorf("Valid = %v, want %v", got, tc.expect)
			}
		})
	}
}

// FuzzValid: Valid never panics; on input encoding/json accepts, Valid
// agrees with the depth encoding/json's own tokenizer reports, and
// accepts nothing encoding/json refuses.
func FuzzValid(f *testing.F) {
	for _, s := range []string{`{"id":"evt_1"}`, `[[[[`, `"\"[["`, `{"a":[{"b":[1,2,{"c":null}]}]}`, strings.Repeat("[", 200), `{"s":"\\"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got := jsonlimit.Valid(b)
		if !json.Valid(b) {
			if got {
				t.Fatalf("Valid accepted what encoding/json refuses: %q", b)
			}
			return
		}
		if want := depth(t, b) <= jsonlimit.MaxDepth; got != want {
			t.Fatalf("Valid = %v on %q, want %v (depth %d)", got, b, want, depth(t, b))
		}
	})
}

// depth is the deepest nesting in valid JSON b, by encoding/json's tokens.
func depth(t *testing.T, b []byte) int {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	cur, deepest := 0, 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return deepest
		}
		if err != nil {
			t.Fatalf("tokenizing valid JSON %q: %v", b, err)
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			cur++
			deepest = max(deepest, cur)
		case json.Delim(']'), json.Delim('}'):
			cur--
		}
	}
}

func BenchmarkDepthOK(b *testing.B) {
	body := bytes.Repeat([]byte(`{"id":"evt_1","amount":1000,"items":[1,2,3]},`), 1<<14)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		jsonlimit.DepthOK(body)
	}
}
