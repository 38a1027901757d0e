package main

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestFileNameIsKubeconformsPath: a kind's file is where kubeconform's
// {{.ResourceKind}}{{.KindSuffix}}.json template looks for it.
func TestFileNameIsKubeconformsPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		given  gvk
		expect string
	}{
		{given: gvk{Version: "v1", Kind: "Service"}, expect: "service-v1.json"},
		{given: gvk{Group: "apps", Version: "v1", Kind: "Deployment"}, expect: "deployment-apps-v1.json"},
		{given: gvk{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}, expect: "ingress-networking-v1.json"},
		{given: gvk{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}, expect: "servicemonitor-monitoring-v1.json"},
	} {
		if got := tc.given.fileName(); got != tc.expect {
			t.Errorf("%+v: %s, want %s", tc.given, got, tc.expect)
		}
	}
}

// TestStrictRefusesUndeclaredFields: every object with declared
// properties refuses others, at any depth, but one that preserves
// unknown fields or declares its own additionalProperties; an optional
// field may be null, a required one may not.
func TestStrictRefusesUndeclaredFields(t *testing.T) {
	t.Parallel()
	var s schema
	if err := json.Unmarshal([]byte(`{
		"type": "object", "required": ["name"],
		"properties": {
			"name": {"type": "string"},
			"spec": {"type": "object", "properties": {
				"ports": {"type": "array", "items": {"type": "object", "properties": {"port": {"type": "integer"}}}}
			}},
			"labels": {"type": "object", "additionalProperties": {"type": "string"}},
			"raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"a": {"type": "string"}}}
		}}`), &s); err != nil {
		t.Fatal(err)
	}
	strict(s)
	at := func(path ...string) schema {
		cur := s
		for _, p := range path {
			cur = cur[p].(schema)
		}
		return cur
	}
	for _, tc := range []struct {
		path   []string
		expect any
	}{
		{nil, false},
		{[]string{"properties", "spec"}, false},
		{[]string{"properties", "spec", "properties", "ports", "items"}, false},
		{[]string{"properties", "labels"}, schema{"type": "string"}},
		{[]string{"properties", "raw"}, nil},
	} {
		if got := at(tc.path...)["additionalProperties"]; !reflect.DeepEqual(got, tc.expect) {
			t.Errorf("%v: additionalProperties %v, want %v", tc.path, got, tc.expect)
		}
	}
	if got := at("properties", "name")["type"]; got != "string" {
		t.Errorf("required name: type %v, want string alone", got)
	}
	if got := at("properties", "spec")["type"]; !reflect.DeepEqual(got, []any{"object", "null"}) {
		t.Errorf("optional spec: type %v, want object or null", got)
	}
}
