package termsafe_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/webhookd/webhookd/internal/termsafe"
)

func TestString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ given, expect string }{
		{"plain ünïcödé ✓ and emoji 👩‍💻", "plain ünïcödé ✓ and emoji 👩‍💻"},
		{"{\n\t\"a\": 1\n}", "{\n\t\"a\": 1\n}"},
		{"\x1b[2J\x1b[Hcleared", `\x1b[2J\x1b[Hcleared`},
		{"\x1b]0;title\x07", `\x1b]0;title\a`},
		{"shown\rhidden", `shown\rhidden`},
		{"back\x08space", `back\bspace`},
		{"del\x7f", `del\x7f`},
		{"c1 csi \u009b2J", `c1 csi \u009b2J`},
		{"evil\u202etxt.exe", `evil\u202etxt.exe`},
		{"isolate\u2066x\u2069", `isolate\u2066x\u2069`},
		{"line\u2028sep", `line\u2028sep`},
		{"bad\xffbyte", `bad\xffbyte`},
		{"cut\xe2\x9c", `cut\xe2\x9c`},
	} {
		if got := termsafe.String(tc.given); got != tc.expect {
			t.Errorf("String(%q) = %q, want %q", tc.given, got, tc.expect)
		}
	}
}

func TestWriter(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	w := termsafe.NewWriter(&b)
	n, err := fmt.Fprintf(w, "body %s\n", "\x1b[1A\x1b[2Kok")
	if err != nil || n != len("body \x1b[1A\x1b[2Kok\n") {
		t.Fatalf("Fprintf = %d, %v", n, err)
	}
	if got, want := b.String(), "body \\x1b[1A\\x1b[2Kok\n"; got != want {
		t.Errorf("wrote %q, want %q", got, want)
	}
}
