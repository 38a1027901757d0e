// Package field names the configured field a problem is about. Each
// package validates its own spec and returns an *Error whose Path is
// relative to that spec ("url", "circuit.failures", "secrets[0]"); the
// package that holds the spec in a larger one prefixes the path
// ("destinations[1]"), and the configuration layer, which alone knows
// the file, turns the full path into "<file>:<line>: <path>: <problem>".
//
// Paths use the configuration's key names (the YAML keys), so the
// operator reads the key they wrote.
package field

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Error is a problem with one configured field.
type Error struct {
	// Path is the field's key path, e.g. "sources[0].destinations[1].url";
	// "" for the spec as a whole.
	Path string
	// Err says what is wrong; its text never holds a secret.
	Err error
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Err.Error()
	}
	return e.Path + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error at path with a formatted message.
func Errorf(path, format string, args ...any) *Error {
	return &Error{Path: path, Err: fmt.Errorf(format, args...)}
}

// Join joins the problems found, nil when there are none.
func Join(errs ...error) error { return errors.Join(errs...) }

// textPathRE finds a key path at the start of an error's text ("verify.
// secrets[0]: empty"), the form packages that predate Error use.
var textPathRE = regexp.MustCompile(`^([a-z_]+(?:\[\d+\])?(?:\.[a-z_]+(?:\[\d+\])?)*): (.+)$`)

// Prefix puts prefix before the path of every problem in err (an *Error,
// errors joined, or a plain error whose text starts with a key path) and
// returns them joined; nil when err is nil. A plain error without a path
// is placed at prefix itself.
func Prefix(prefix string, err error) error {
	if err == nil {
		return nil
	}
	var out []error
	for _, e := range List(err) {
		out = append(out, &Error{Path: joinPath(prefix, e.Path), Err: e.Err})
	}
	return errors.Join(out...)
}

// List flattens err (errors joined, *Errors, plain errors) into *Errors,
// in order; a plain error's leading key path, if any, becomes its Path.
func List(err error) []*Error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []*Error
		for _, e := range j.Unwrap() {
			out = append(out, List(e)...)
		}
		return out
	}
	var fe *Error
	if errors.As(err, &fe) && fe == err {
		return []*Error{fe}
	}
	if m := textPathRE.FindStringSubmatch(err.Error()); m != nil {
		return []*Error{{Path: m[1], Err: errors.New(m[2])}}
	}
	return []*Error{{Err: err}}
}

func joinPath(prefix, path string) string {
	switch {
	case path == "":
		return prefix
	case prefix == "" || strings.HasPrefix(path, "["):
		return prefix + path
	default:
		return prefix + "." + path
	}
}

// Index returns the path of element i of the list at path: "sources[2]".
func Index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// Split returns path's parts: key names as strings, list indexes as
// ints ("sources[0].url" is "sources", 0, "url").
func Split(path string) []any {
	var out []any
	for _, part := range strings.Split(path, ".") {
		name, rest, _ := strings.Cut(part, "[")
		if name != "" {
			out = append(out, name)
		}
		for rest != "" {
			num, after, _ := strings.Cut(rest, "]")
			if n, err := strconv.Atoi(num); err == nil {
				out = append(out, n)
			}
			_, rest, _ = strings.Cut(after, "[")
		}
	}
	return out
}
