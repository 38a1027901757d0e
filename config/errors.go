package config

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/webhookd/webhookd/internal/field"
)

// Error is one problem with the configuration, located where the
// operator fixes it: "<file>:<line>: <key>: <problem>", or
// "$<VAR> (environment): <key>: <problem>" for a value an environment
// variable set. Every configuration error has this one form.
type Error struct {
	// Where is "w.yaml:12", "w.yaml", or "$DATABASE_URL (environment)".
	Where string
	// Key is the key path, "sources[0].destinations[1].url"; "" when
	// none applies.
	Key string
	// Msg says what is wrong; it never holds a secret.
	Msg string

	line int // for ordering; 0 when unknown
}

func (e *Error) Error() string {
	if e.Key == "" {
		return e.Where + ": " + e.Msg
	}
	return e.Where + ": " + e.Key + ": " + e.Msg
}

// at locates a problem at line of path (no line when 0).
func at(path string, line int, key, msg string) *Error {
	where := path
	if line > 0 {
		where += ":" + strconv.Itoa(line)
	}
	return &Error{Where: where, Key: key, Msg: msg, line: line}
}

// locate names the key of fe, and where its value came from: the
// environment variable that overrides it, or the file and line.
func (c *Config) locate(fe *field.Error) *Error {
	if v := c.fromEnv[fe.Path]; v != "" {
		return &Error{Where: "$" + v + " (environment)", Key: fe.Path, Msg: fe.Err.Error()}
	}
	return at(c.Path, lineOf(c.root, field.Split(fe.Path)...), fe.Path, fe.Err.Error())
}

// problems collects a file's problems: each once, a key with a value
// that could not be read (decode, ${VAR}) keeping only that problem,
// since what a check found there is the zero value, not the operator's.
type problems struct {
	c    *Config
	list []*Error
}

func (p *problems) add(errs ...error) {
	for _, err := range errs {
		for _, e := range flatten(err) {
			var ce *Error
			if errors.As(e, &ce) {
				p.list = append(p.list, ce)
			}
		}
	}
}

// addField adds the *field.Errors of err, located.
func (p *problems) addField(err error) {
	for _, fe := range field.List(err) {
		p.list = append(p.list, p.c.locate(fe))
	}
}

// err returns the problems joined in the order of the file, or nil.
func (p *problems) err() error {
	var out []error
	seen := map[string]bool{}
	unreadable := map[string]bool{}
	for _, e := range p.list {
		if isUnreadable(e.Msg) {
			unreadable[e.Key] = true
		}
	}
	slices.SortStableFunc(p.list, func(a, b *Error) int { return cmp.Compare(a.line, b.line) })
	for _, e := range p.list {
		if s := e.Error(); !seen[s] && (isUnreadable(e.Msg) || !unreadable[e.Key]) {
			seen[s] = true
			out = append(out, e)
		}
	}
	return errors.Join(out...)
}

// isUnreadable tells the problems that leave a key without the value the
// operator wrote.
func isUnreadable(msg string) bool {
	return strings.Contains(msg, "cannot unmarshal") || strings.Contains(msg, "is not a duration") ||
		strings.Contains(msg, "is not set in the environment") || strings.Contains(msg, "holds a line break")
}

// flatten lists the errors joined in err.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// yamlLineRE finds the line yaml.v3 names in its messages.
var yamlLineRE = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

// durationRE finds yaml.v3's message for a value that is no duration.
var durationRE = regexp.MustCompile("^cannot unmarshal !!\\w+ `(.*)` into time.Duration$")

// decodeErrors turns what yaml.v3 reports (a syntax error, or a
// TypeError listing every value that did not fit its key) into Errors
// naming the key at each line.
func decodeErrors(path string, root *yaml.Node, err error) error {
	var lines []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		lines = te.Errors
	} else {
		lines = []string{err.Error()}
	}
	errs := make([]error, 0, len(lines))
	for _, l := range lines {
		m := yamlLineRE.FindStringSubmatch(l)
		if m == nil {
			errs = append(errs, at(path, 0, "", strings.TrimPrefix(l, "yaml: ")))
			continue
		}
		line, _ := strconv.Atoi(m[1])
		msg := m[2]
		if d := durationRE.FindStringSubmatch(msg); d != nil {
			msg = fmt.Sprintf("%q is not a duration (use e.g. 30s, 2m, 720h)", d[1])
		}
		errs = append(errs, at(path, line, keyAtLine(root, line), msg))
	}
	return errors.Join(errs...)
}

// keyAtLine returns the path of the first value written on line of the
// document, or "" when none is.
func keyAtLine(root *yaml.Node, line int) string {
	var walk func(n *yaml.Node, path []any) []any
	walk = func(n *yaml.Node, path []any) []any {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				if p := walk(c, path); p != nil {
					return p
				}
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				sub := append(append([]any(nil), path...), k.Value)
				if p := walk(v, sub); p != nil {
					return p
				}
				if k.Line == line && v.Kind != yaml.ScalarNode {
					return sub
				}
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				if p := walk(c, append(append([]any(nil), path...), i)); p != nil {
					return p
				}
			}
		case yaml.ScalarNode, yaml.AliasNode:
			if n.Line == line {
				return path
			}
		}
		return nil
	}
	if root == nil {
		return ""
	}
	return keyPath(walk(root, nil)...)
}

// keyPath renders a path like sources[0].destinations[1].url.
func keyPath(path ...any) string {
	var b strings.Builder
	for _, p := range path {
		switch p := p.(type) {
		case int:
			b.WriteString("[" + strconv.Itoa(p) + "]")
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(p)
		}
	}
	return b.String()
}

// lineOf finds the line of the value at path in the YAML document, or
// the line of the deepest part of path that is there; 0 for none.
func lineOf(root *yaml.Node, path ...any) int {
	n := root
	if n == nil {
		return 0
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := 0
	for _, p := range path {
		switch p := p.(type) {
		case string:
			if n.Kind != yaml.MappingNode {
				return line
			}
			found := false
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == p {
					line = n.Content[i].Line
					n = n.Content[i+1]
					found = true
					break
				}
			}
			if !found {
				return line
			}
		case int:
			if n.Kind != yaml.SequenceNode || p >= len(n.Content) {
				return line
			}
			n = n.Content[p]
			line = n.Line
		}
	}
	return line
}

// NotFoundHint is the error of an operator command that found no config
// file where it looked by default.
func NotFoundHint(path string) error {
	return fmt.Errorf("no config file %s here: pass -f PATH (--config) to name one; webhookd.example.yaml is a starting point", path)
}
