package config

// The environment's part of a config: ${VAR} expansion in values and the
// variables that override a key.

import (
	"fmt"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// envOverrides are the environment variables that override a key of the
// file (SPEC).
var envOverrides = []struct {
	env, key string
	field    func(*File) *string
}{
	{"DATABASE_URL", "database_url", func(f *File) *string { return &f.DatabaseURL }},
	{"REDIS_URL", "redis_url", func(f *File) *string { return &f.URL }},
	{"WEBHOOKD_LISTEN", "listen", func(f *File) *string { return &f.Listen }},
	{"WEBHOOKD_ADMIN_TOKEN", "admin_token", func(f *File) *string { return &f.AdminToken }},
}

// varRE is a ${VAR} or ${VAR:-default} in a value.
var varRE = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

// expandVars replaces ${VAR} in the scalar values of the parsed document
// (not in keys or comments) with the variable's value from lookup, and
// ${VAR:-default} with default when VAR is unset or empty. An unset
// ${VAR} is an error naming it and its key: a secret left out of the
// environment must not become an empty secret. Expanding after parsing
// keeps a value whole whatever it holds (" #", ": ", quotes): it is
// never read as YAML. A scalar written plain is then typed from its
// expanded value, as if written there (a number, a duration); a quoted
// one stays a string. A value holding a line break is refused.
func expandVars(file string, n *yaml.Node, path []any, lookup func(string) (string, bool)) []error {
	var errs []error
	switch n.Kind {
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "${") {
			return nil
		}
		n.Value = varRE.ReplaceAllStringFunc(n.Value, func(m string) string {
			sub := varRE.FindStringSubmatch(m)
			name, hasDefault, def := sub[1], sub[2] != "", sub[3]
			v, ok := lookup(name)
			switch {
			case hasDefault && v == "":
				v = def
			case !ok:
				errs = append(errs, at(file, n.Line, keyPath(path...), fmt.Sprintf("${%s} is not set in the environment: set it, or write ${%s:-<default>} for a value to use without it", name, name)))
			}
			if strings.ContainsAny(v, "\r\n") {
				errs = append(errs, at(file, n.Line, keyPath(path...), fmt.Sprintf("${%s} holds a line break; not allowed in the config", name)))
			}
			return v
		})
		if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0 {
			n.Tag = "" // resolved again from the expanded value
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 { // values only
			errs = append(errs, expandVars(file, n.Content[i+1], append(path[:len(path):len(path)], n.Content[i].Value), lookup)...)
		}
	case yaml.DocumentNode:
		for _, c := range n.Content {
			errs = append(errs, expandVars(file, c, path, lookup)...)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			errs = append(errs, expandVars(file, c, append(path[:len(path):len(path)], i), lookup)...)
		}
	}
	return errs
}
