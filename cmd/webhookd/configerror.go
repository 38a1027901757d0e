package main

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// configError is one problem with the configuration, located where the
// operator fixes it: "<file>:<line>: <key>: <problem>", or
// "$<VAR> (environment): <key>: <problem>" for a value an environment
// variable set. Every configuration error has this one form.
type configError struct {
	where string // "w.yaml:12", "w.yaml", or "$DATABASE_URL (environment)"
	key   string // "sources[0].destinations[1].url"; "" when none applies
	msg   string
}

func (e *configError) Error() string {
	if e.key == "" {
		return e.where + ": " + e.msg
	}
	return e.where + ": " + e.key + ": " + e.msg
}

// at locates a problem at line of path (no line when 0).
func at(path string, line int, key, msg string) *configError {
	where := path
	if line > 0 {
		where += ":" + strconv.Itoa(line)
	}
	return &configError{where: where, key: key, msg: msg}
}

// fieldError names the key at path, and where its value came from: the
// environment variable that overrides it, or the file and line.
func (c *config) fieldError(msg string, path ...any) error {
	key := keyPath(path...)
	if v := c.fromEnv[key]; v != "" {
		return &configError{where: "$" + v + " (environment)", key: key, msg: msg}
	}
	return at(c.path, lineOf(c.root, path...), key, msg)
}

// yamlLineRE finds the line yaml.v3 names in its messages.
var yamlLineRE = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

// decodeErrors turns what yaml.v3 reports (a syntax error, or a
// TypeError listing every value that did not fit its key) into
// configErrors naming the key at each line.
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
		errs = append(errs, at(path, line, keyAtLine(root, line), m[2]))
	}
	return errors.Join(errs...)
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

// lineOf finds the line of the value at path in the YAML document, or 0.
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

// configNotFoundHint is added to the error of an operator command that
// found no config file where it looked by default.
func configNotFoundHint(path string) error {
	return fmt.Errorf("no config file %s here: pass -f PATH (--config) to name one; webhookd.example.yaml is a starting point", path)
}
