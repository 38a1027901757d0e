package config

import (
	"net"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/webhookd/webhookd/internal/suggest"
)

// reflectFile is the type the document decodes into.
var reflectFile = reflect.TypeFor[File]()

// renamedKeys names the keys that replaced keys of earlier versions.
var renamedKeys = map[string]string{
	"sweep_interval": "worker.recovery_interval",
	"relay_interval": "worker.recovery_interval",
	"relay_min_age":  "worker.recovery_min_age",
}

// unknownKeys returns an error for every mapping key under n that no
// field of t takes (by its yaml tag, inline structs included), with the
// key it probably meant: the strict decoding the expanded document gets,
// since yaml decodes a node only leniently.
func unknownKeys(file string, n *yaml.Node, t reflect.Type, path []any) []error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[yaml.Node]() || reflect.PointerTo(t).Implements(reflect.TypeFor[yaml.Unmarshaler]()) {
		return nil
	}
	var out []error
	switch {
	case n.Kind == yaml.DocumentNode:
		for _, c := range n.Content {
			out = append(out, unknownKeys(file, c, t, path)...)
		}
	case n.Kind == yaml.SequenceNode && t.Kind() == reflect.Slice:
		for i, c := range n.Content {
			out = append(out, unknownKeys(file, c, t.Elem(), append(path[:len(path):len(path)], i))...)
		}
	case n.Kind == yaml.AliasNode && n.Alias != nil:
		out = unknownKeys(file, n.Alias, t, path)
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Struct:
		fields := yamlFields(t)
		names := make([]string, 0, len(fields))
		for name := range fields {
			names = append(names, name)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			ft, ok := fields[k.Value]
			key := keyPath(append(path[:len(path):len(path)], k.Value)...)
			switch {
			case k.ShortTag() == "!!merge":
				out = append(out, unknownKeys(file, v, t, path)...)
			case !ok && renamedKeys[k.Value] != "":
				out = append(out, at(file, k.Line, key, "unknown key (replaced by "+renamedKeys[k.Value]+")"))
			case !ok:
				out = append(out, at(file, k.Line, key, "unknown key"+suggest.DidYouMean(k.Value, names)))
			default:
				out = append(out, unknownKeys(file, v, ft, append(path[:len(path):len(path)], k.Value))...)
			}
		}
	}
	return out
}

// yamlFields maps the YAML keys of struct t to their types, the fields of
// inline structs included.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := make(map[string]reflect.Type, t.NumField())
	for f := range t.Fields() {
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case opts == "inline":
			for k, v := range yamlFields(f.Type) {
				out[k] = v
			}
		case name != "" && name != "-":
			out[name] = f.Type
		}
	}
	return out
}

// ListenNames returns the host name a listen address names, lower-case,
// for the admin surface's host check: none for an IP or every interface.
func ListenNames(listen string) []string {
	host, _, err := net.SplitHostPort(listen)
	if err != nil || host == "" || net.ParseIP(host) != nil {
		return nil
	}
	return []string{strings.ToLower(host)}
}
