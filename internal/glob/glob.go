// Package glob matches event types against the patterns of a
// destination's filter (and of the event list's type filter): `*` matches
// any run of characters, `/` and `.` included, and a pattern matches the
// whole type. `*` is the only wildcard; `?`, `[`, `]`, `{`, `}` and `\`
// are reserved (an error), so that a later meaning for them changes no
// configured filter. The same pattern is also written as an SQL LIKE
// pattern (Like), so Postgres and Go agree on what matches.
package glob

import (
	"errors"
	"fmt"
	"strings"

	"github.com/webhookd/webhookd/internal/textfield"
)

// MaxLen is the longest pattern Compile accepts, in bytes: an event type
// is at most as long (gateway/eventid.MaxLen).
const MaxLen = 255

// ErrInvalid is returned by Compile for a pattern that is empty, too long,
// not one line of UTF-8 text, or holds a reserved character.
var ErrInvalid = errors.New("invalid glob")

// reserved are the characters a pattern may not hold.
const reserved = `?[]{}\`

// Pattern is a compiled glob; the zero Pattern matches nothing.
type Pattern struct {
	raw   string
	parts []string // raw split on '*'
}

// Compile parses a pattern. Its error wraps ErrInvalid and says why.
func Compile(pattern string) (Pattern, error) {
	if pattern == "" {
		return Pattern{}, fmt.Errorf("%w: empty pattern", ErrInvalid)
	}
	if err := textfield.CheckLine(pattern, MaxLen); err != nil {
		return Pattern{}, fmt.Errorf("%w %q: %w", ErrInvalid, pattern, err)
	}
	if i := strings.IndexAny(pattern, reserved); i >= 0 {
		return Pattern{}, fmt.Errorf("%w %q: %q is reserved; only * is a wildcard", ErrInvalid, pattern, pattern[i])
	}
	return Pattern{raw: pattern, parts: strings.Split(pattern, "*")}, nil
}

// String returns the pattern as written.
func (p Pattern) String() string { return p.raw }

// Match reports whether s matches the whole pattern.
func (p Pattern) Match(s string) bool {
	if len(p.parts) == 0 {
		return false
	}
	if len(p.parts) == 1 {
		return s == p.parts[0]
	}
	first, last := p.parts[0], p.parts[len(p.parts)-1]
	if len(s) < len(first)+len(last) || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	s = s[len(first) : len(s)-len(last)]
	for _, part := range p.parts[1 : len(p.parts)-1] {
		i := strings.Index(s, part)
		if i < 0 {
			return false
		}
		s = s[i+len(part):]
	}
	return true
}

// Like returns the pattern as an SQL LIKE pattern (ToLike).
func (p Pattern) Like() string { return ToLike(p.raw) }

// likeReplacer escapes LIKE's wildcards and its default escape character
// (\) and turns the glob's `*` into `%`.
var likeReplacer = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`, `*`, `%`)

// ToLike turns a glob, valid or not, into an SQL LIKE pattern with the
// default escape character that matches what the glob matches: `*` any
// run of characters, every other character itself. Admin searches use it
// on globs that Compile would refuse (`?` is then a literal).
func ToLike(glob string) string { return likeReplacer.Replace(glob) }

// Filter is a destination's filter: the event types it wants. A nil
// Filter wants every event, typed or not; a non-empty one wants the
// events whose type matches one of its patterns, and never an event
// without a type.
type Filter []Pattern

// CompileFilter compiles every pattern; the error names the first bad one
// by its index.
func CompileFilter(patterns []string) (Filter, error) {
	if patterns == nil {
		return nil, nil
	}
	if len(patterns) == 0 {
		return nil, fmt.Errorf("%w: an empty filter would want no event; leave it out to want all", ErrInvalid)
	}
	f := make(Filter, len(patterns))
	for i, s := range patterns {
		p, err := Compile(s)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		f[i] = p
	}
	return f, nil
}

// Wants reports whether the filter lets an event of type eventType ("":
// unknown) through.
func (f Filter) Wants(eventType string) bool {
	if f == nil {
		return true
	}
	if eventType == "" {
		return false
	}
	for _, p := range f {
		if p.Match(eventType) {
			return true
		}
	}
	return false
}

// Like returns the filter's patterns as SQL LIKE patterns (Pattern.Like).
func (f Filter) Like() []string {
	out := make([]string, len(f))
	for i, p := range f {
		out[i] = p.Like()
	}
	return out
}
