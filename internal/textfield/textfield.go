// Package textfield checks strings before webhookd stores them in a text
// column or writes them to a log line: Postgres refuses invalid UTF-8 and
// NUL in text (SQLSTATE 22021, failing the whole statement that carried
// the value), and a value without a bound costs storage, log volume and
// index room. The gateway checks what a request brings at the edge and
// answers 400, so such a value never reaches a statement.
package textfield

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// ErrInvalid is wrapped by every error of Check and CheckLine; the
// wrapping message says what is wrong, never the value itself.
var ErrInvalid = errors.New("invalid text")

// Check returns nil when s is valid UTF-8, holds no NUL and is at most
// max bytes long, and otherwise an error wrapping ErrInvalid.
func Check(s string, max int) error {
	return check(s, max, false)
}

// CheckLine is Check for one-line values (ids, names, filters): it also
// refuses every control character (C0, DEL and C1), the line and
// paragraph separators (U+2028, U+2029: line breaks to JavaScript and
// many viewers) and the bidirectional formatting characters (U+061C,
// U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), which show a value in
// another order than it is, so two values that look alike are alike.
func CheckLine(s string, max int) error {
	return check(s, max, true)
}

// breaksLine reports whether r, in a one-line value, would break the
// line or reorder how it shows.
func breaksLine(r rune) bool {
	switch {
	case unicode.IsControl(r), r == 0x2028, r == 0x2029:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f:
		return true
	}
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}

func check(s string, max int, line bool) error {
	if len(s) > max {
		return fmt.Errorf("%w: longer than %d bytes", ErrInvalid, max)
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == 0:
				return fmt.Errorf("%w: contains NUL", ErrInvalid)
			case line && (c < 0x20 || c == 0x7f):
				return fmt.Errorf("%w: contains control characters", ErrInvalid)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			return fmt.Errorf("%w: not valid UTF-8", ErrInvalid)
		}
		if line && breaksLine(r) {
			return fmt.Errorf("%w: contains control, line-separator or bidirectional characters", ErrInvalid)
		}
		i += n
	}
	return nil
}

// Clean returns s made one line of valid UTF-8 of at most max bytes, for
// a value that is kept whatever it holds (a path segment a client sent):
// what CheckLine refuses is replaced by U+FFFD, and the end is cut at a
// rune boundary.
func Clean(s string, max int) string {
	var b []rune
	size := 0
	for _, r := range s { // invalid UTF-8 ranges as U+FFFD
		if r == 0 || breaksLine(r) {
			r = utf8.RuneError
		}
		if size+utf8.RuneLen(r) > max {
			break
		}
		size += utf8.RuneLen(r)
		b = append(b, r)
	}
	return string(b)
}
