// Command kubeschema writes the JSON schemas kubeconform validates
// Kubernetes objects against, from files on this machine: the API's
// OpenAPI (Swagger 2.0) document that the k8s.io/kubernetes Go module
// ships (api/openapi-spec/swagger.json) and CustomResourceDefinitions
// (the prometheus-operator's ServiceMonitor). CI has no way to reach the
// schemas kubeconform downloads by default, so .ci/deploy-check builds
// them here instead.
//
//	go run ./deploy/kubeschema -swagger swagger.json -crd servicemonitors.yaml -out DIR
//	kubeconform -strict -schema-location 'DIR/{{.ResourceKind}}{{.KindSuffix}}.json' ...
//
// Every schema is strict, as kubectl's validation is: an object with
// declared properties refuses any other (additionalProperties: false)
// unless it preserves unknown fields. Like the schemas kubeconform's
// author publishes (openapi2jsonschema), an int-or-string value takes
// either, an optional field may be null, and apiVersion and kind must
// name the kind the file is for; a resource.Quantity also takes a number,
// as the API server does.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// definitionsFile holds every definition of the OpenAPI document; each
// kind's file refers to it.
const definitionsFile = "_definitions.json"

// schema is one JSON schema node, as decoded.
type schema = map[string]any

// gvk is one group-version-kind an OpenAPI definition serves.
type gvk struct {
	Group, Version, Kind string
}

// apiVersion is the object's apiVersion field for k.
func (k gvk) apiVersion() string {
	if k.Group == "" {
		return k.Version
	}
	return k.Group + "/" + k.Version
}

// fileName is where kubeconform's template
// {{.ResourceKind}}{{.KindSuffix}}.json looks for k's schema: the kind,
// the group's first label and the version, lower case
// (deployment-apps-v1.json, service-v1.json,
// servicemonitor-monitoring-v1.json).
func (k gvk) fileName() string {
	name := strings.ToLower(k.Kind)
	if k.Group != "" {
		name += "-" + strings.ToLower(strings.Split(k.Group, ".")[0])
	}
	return name + "-" + strings.ToLower(k.Version) + ".json"
}

func main() {
	var crds multiFlag
	swagger := flag.String("swagger", "", "the Kubernetes API's OpenAPI v2 document (swagger.json)")
	out := flag.String("out", "", "the directory to write the schemas to")
	flag.Var(&crds, "crd", "a YAML file of CustomResourceDefinitions (repeatable)")
	flag.Parse()
	if *swagger == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: kubeschema -swagger swagger.json [-crd crds.yaml ...] -out DIR")
		os.Exit(2)
	}
	n, err := run(*swagger, crds, *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeschema:", err)
		os.Exit(1)
	}
	fmt.Printf("kubeschema: %d schemas in %s\n", n, *out)
}

// multiFlag is a flag given any number of times.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// run writes the definitions file and one file per kind of the OpenAPI
// document and of each CRD file into out, and returns how many kinds it
// wrote.
func run(swaggerPath string, crdPaths []string, out string) (int, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return 0, fmt.Errorf("error creating %s: %w", out, err)
	}
	n, err := writeAPI(swaggerPath, out)
	if err != nil {
		return 0, err
	}
	for _, p := range crdPaths {
		m, err := writeCRDs(p, out)
		if err != nil {
			return 0, err
		}
		n += m
	}
	return n, nil
}

// writeAPI writes the OpenAPI document's definitions and a file per kind
// it serves.
func writeAPI(path, out string) (int, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("error reading the OpenAPI document: %w", err)
	}
	var doc struct {
		Definitions map[string]schema `json:"definitions"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return 0, fmt.Errorf("error decoding %s: %w", path, err)
	}
	if len(doc.Definitions) == 0 {
		return 0, fmt.Errorf("%s holds no definitions", path)
	}
	defs := make(schema, len(doc.Definitions))
	for name, def := range doc.Definitions {
		defs[name] = strict(apiTypes(name, def))
	}
	if err := writeJSON(filepath.Join(out, definitionsFile), schema{"definitions": defs}); err != nil {
		return 0, err
	}
	n := 0
	for _, name := range sortedKeys(doc.Definitions) {
		kinds, err := kindsOf(doc.Definitions[name])
		if err != nil {
			return 0, fmt.Errorf("definition %s: %w", name, err)
		}
		for _, k := range kinds {
			kind := pinKind(rewriteRefs(defs[name]).(schema), kinds)
			if err := writeJSON(filepath.Join(out, k.fileName()), kind); err != nil {
				return 0, err
			}
			n++
		}
	}
	return n, nil
}

// apiTypes gives the definitions whose wire form is looser than their
// declared type the form the API server accepts: an IntOrString is a
// string or an integer, a Quantity a string or a number.
func apiTypes(name string, def schema) schema {
	switch name {
	case "io.k8s.apimachinery.pkg.util.intstr.IntOrString":
		return schema{"description": def["description"], "oneOf": []any{schema{"type": "string"}, schema{"type": "integer"}}}
	case "io.k8s.apimachinery.pkg.api.resource.Quantity":
		return schema{"description": def["description"], "oneOf": []any{schema{"type": "string"}, schema{"type": "number"}}}
	}
	return def
}

// kindsOf reads a definition's x-kubernetes-group-version-kind list: the
// kinds it is the schema of (none for a definition that is only a part).
func kindsOf(def schema) ([]gvk, error) {
	list, ok := def["x-kubernetes-group-version-kind"].([]any)
	if !ok {
		return nil, nil
	}
	var kinds []gvk
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, errors.New("x-kubernetes-group-version-kind holds a non-object")
		}
		group, _ := m["group"].(string)
		version, _ := m["version"].(string)
		kind, _ := m["kind"].(string)
		if version == "" || kind == "" {
			return nil, errors.New("x-kubernetes-group-version-kind lacks a version or a kind")
		}
		kinds = append(kinds, gvk{Group: group, Version: version, Kind: kind})
	}
	return kinds, nil
}

// pinKind makes apiVersion and kind of the object s describes take only
// the values of kinds (a definition may serve several, as DeleteOptions
// does).
func pinKind(s schema, kinds []gvk) schema {
	props, ok := s["properties"].(schema)
	if !ok {
		return s
	}
	var versions, names []any
	for _, k := range kinds {
		if !slices.Contains(versions, any(k.apiVersion())) {
			versions = append(versions, k.apiVersion())
		}
		if !slices.Contains(names, any(k.Kind)) {
			names = append(names, k.Kind)
		}
	}
	for field, values := range map[string][]any{"apiVersion": versions, "kind": names} {
		if p, ok := props[field].(schema); ok {
			p["enum"] = values
		}
	}
	return s
}

// writeCRDs writes a file per version of each CustomResourceDefinition in
// a YAML file (several documents allowed).
func writeCRDs(path, out string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("error reading CRDs: %w", err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	n := 0
	for {
		var crd struct {
			Kind string `yaml:"kind"`
			Spec struct {
				Group string `yaml:"group"`
				Names struct {
					Kind string `yaml:"kind"`
				} `yaml:"names"`
				Versions []struct {
					Name   string `yaml:"name"`
					Schema struct {
						OpenAPIV3Schema schema `yaml:"openAPIV3Schema"`
					} `yaml:"schema"`
				} `yaml:"versions"`
			} `yaml:"spec"`
		}
		err := dec.Decode(&crd)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("error decoding %s: %w", path, err)
		}
		if crd.Kind != "CustomResourceDefinition" {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Schema.OpenAPIV3Schema == nil {
				return 0, fmt.Errorf("%s: %s %s has no openAPIV3Schema", path, crd.Spec.Names.Kind, v.Name)
			}
			k := gvk{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
			s := pinKind(strict(v.Schema.OpenAPIV3Schema), []gvk{k})
			if err := writeJSON(filepath.Join(out, k.fileName()), s); err != nil {
				return 0, err
			}
			n++
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("%s holds no CustomResourceDefinition with a schema", path)
	}
	return n, nil
}

// strict walks a schema node: an object with declared properties refuses
// others (unless it preserves unknown fields or says otherwise), and a
// property its object does not require may be null.
func strict(s schema) schema {
	props, hasProps := s["properties"].(schema)
	if hasProps {
		required := map[string]bool{}
		if list, ok := s["required"].([]any); ok {
			for _, r := range list {
				if name, ok := r.(string); ok {
					required[name] = true
				}
			}
		}
		for name, p := range props {
			ps, ok := p.(schema)
			if !ok {
				continue
			}
			strict(ps)
			if t, ok := ps["type"].(string); ok && !required[name] && t != "null" {
				ps["type"] = []any{t, "null"}
			}
		}
		preserve, _ := s["x-kubernetes-preserve-unknown-fields"].(bool)
		if _, set := s["additionalProperties"]; !set && !preserve {
			s["additionalProperties"] = false
		}
	}
	if items, ok := s["items"].(schema); ok {
		strict(items)
	}
	if extra, ok := s["additionalProperties"].(schema); ok {
		strict(extra)
	}
	for _, key := range []string{"allOf", "anyOf", "oneOf"} {
		if list, ok := s[key].([]any); ok {
			for _, item := range list {
				if is, ok := item.(schema); ok {
					strict(is)
				}
			}
		}
	}
	return s
}

// rewriteRefs returns a deep copy of v whose "#/definitions/..."
// references point into the definitions file, for a kind's own file.
func rewriteRefs(v any) any {
	switch t := v.(type) {
	case schema:
		c := make(schema, len(t))
		for k, e := range t {
			if ref, ok := e.(string); ok && k == "$ref" && strings.HasPrefix(ref, "#/definitions/") {
				c[k] = definitionsFile + ref
				continue
			}
			c[k] = rewriteRefs(e)
		}
		return c
	case []any:
		c := make([]any, len(t))
		for i, e := range t {
			c[i] = rewriteRefs(e)
		}
		return c
	}
	return v
}

// writeJSON writes v to path as JSON.
func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("error encoding %s: %w", path, err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("error writing schema: %w", err)
	}
	return nil
}

// sortedKeys returns m's keys in order, so the output does not depend on
// map order.
func sortedKeys(m map[string]schema) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
