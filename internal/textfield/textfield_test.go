package textfield_test

import (
	"errors"
	"testing"

	"github.com/webhookd/webhookd/internal/textfield"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		given                     string
		expectCheck, expectInLine bool
	}{
		{"evt_1", true, true},
		{"", true, true},
		{"ünïcödé ✓", true, true},
		{"tab\there", true, false},
		{"new\nline", true, false},
		{"del\x7f", true, false},
		{"c1\u0085", true, false},
		{"line\u2028sep", true, false},
		{"para\u2029sep", true, false},
		{"evil\u202etxt", true, false},
		{"iso\u2066late", true, false},
		{"mark\u200f", true, false},
		{"nul\x00", false, false},
		{"bad\xff", false, false},
		{"cut\xe2\x9c", false, false},
		{"0123456789abcdefg", false, false}, // over the 16 bytes allowed below
	} {
		if err := textfield.Check(tc.given, 16); (err == nil) != tc.expectCheck || err != nil && !errors.Is(err, textfield.ErrInvalid) {
			t.Errorf("Check(%q) = %v, want ok %v", tc.given, err, tc.expectCheck)
		}
		if err := textfield.CheckLine(tc.given, 16); (err == nil) != tc.expectInLine || err != nil && !errors.Is(err, textfield.ErrInvalid) {
			t.Errorf("CheckLine(%q) = %v, want ok %v", tc.given, err, tc.expectInLine)
		}
	}
}

func TestClean(t *testing.T) {
	for in, want := range map[string]string{
		"stripe":             "stripe",
		"a\x00b\nc":          "a\ufffdb\ufffdc",
		"\xff\xfe":           "\ufffd\ufffd",
		"abcdefghij-toolong": "abcdefghij",
		"\u202eevil":         "\ufffdevil",
	} {
		got := textfield.Clean(in, 10)
		if got != want || textfield.CheckLine(got, 10) != nil {
			t.Errorf("Clean(%q) = %q, want %q", in, got, want)
		}
	}
}
