package field_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/webhookd/webhookd/internal/field"
)

func TestPrefix(t *testing.T) {
	t.Parallel()
	err := field.Join(
		field.Errorf("url", "must be an absolute URL"),
		errors.New("verify.secrets[0]: empty"),
		errors.New("something without a path"),
		field.Prefix("circuit", field.Errorf("failures", "must not be negative")),
	)
	got := field.Prefix("sources[1].destinations[0]", err)
	var paths []string
	for _, e := range field.List(got) {
		paths = append(paths, e.Path)
	}
	want := []string{
		"sources[1].destinations[0].url",
		"sources[1].destinations[0].verify.secrets[0]",
		"sources[1].destinations[0]",
		"sources[1].destinations[0].circuit.failures",
	}
	if !reflect.DeepEqual(paths, want) {
		t.Errorf("paths %q, want %q", paths, want)
	}
	if field.Prefix("x", nil) != nil {
		t.Error("Prefix of nil is not nil")
	}
}

func TestSplit(t *testing.T) {
	t.Parallel()
	for given, expect := range map[string][]any{
		"sources[0].destinations[12].url": {"sources", 0, "destinations", 12, "url"},
		"lease":                           {"lease"},
		"admin.tokens[1]":                 {"admin", "tokens", 1},
		"":                                nil,
	} {
		if got := field.Split(given); !reflect.DeepEqual(got, expect) {
			t.Errorf("Split(%q) = %v, want %v", given, got, expect)
		}
	}
}
