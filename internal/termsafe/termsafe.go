// Package termsafe makes untrusted text safe to print on a terminal. A
// payload, an event id or a destination's answer can carry escape
// sequences a terminal acts on (clear the screen, move the cursor and
// rewrite earlier lines, hide text, set the window title), a carriage
// return that overwrites the line, or bidirectional controls that show
// text in another order than it is. termsafe writes each such character
// as a visible escape instead (\x1b, \r, \u202e), and a byte that is not
// UTF-8 as \xff; newlines and tabs are kept, so indented JSON and tables
// still read as such.
package termsafe

import (
	"io"
	"strconv"
	"unicode/utf8"
)

// String returns s with every character a terminal could act on written
// as an escape (see the package comment).
func String(s string) string {
	return string(appendSafe(nil, []byte(s)))
}

// unsafe reports whether r, printed as it is, could change what the
// terminal shows of other text: a C0 control but newline and tab, DEL, a
// C1 control, the line and paragraph separators, or a bidirectional
// formatting character (U+061C, U+200E–U+200F, U+202A–U+202E,
// U+2066–U+2069).
func unsafe(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c || r == 0x200e || r == 0x200f || r == 0x2028 || r == 0x2029:
		return true
	case r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// appendSafe appends p to dst, escaped as String says.
func appendSafe(dst, p []byte) []byte {
	for i := 0; i < len(p); {
		r, n := utf8.DecodeRune(p[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			dst = append(dst, `\x`...)
			dst = append(dst, "0123456789abcdef"[p[i]>>4], "0123456789abcdef"[p[i]&0xf])
		case unsafe(r):
			q := strconv.QuoteRuneToASCII(r) // '\x1b', '\u202e'
			dst = append(dst, q[1:len(q)-1]...)
		default:
			dst = append(dst, p[i:i+n]...)
		}
		i += n
	}
	return dst
}

// Writer writes what it is given to its underlying writer made safe as
// String does. Each Write is escaped on its own: a UTF-8 sequence cut
// across two writes is written as \x escapes, so write whole strings
// (fmt's functions and text/tabwriter do).
type Writer struct {
	w   io.Writer
	buf []byte
}

// NewWriter returns a Writer to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write writes p made safe; it returns len(p) when the underlying write
// succeeded, and its error otherwise.
func (w *Writer) Write(p []byte) (int, error) {
	w.buf = appendSafe(w.buf[:0], p)
	if _, err := w.w.Write(w.buf); err != nil {
		return 0, err
	}
	return len(p), nil
}
