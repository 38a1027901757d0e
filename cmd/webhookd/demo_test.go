package main

import (
	"strings"
	"testing"

	"github.com/webhookd/webhookd"
)

// TestDemoOutsideACheckout: with no webhookd.example.yaml in the current
// directory, demo runs its built-in copy (a binary installed elsewhere
// works), and its help says which file it reads.
func TestDemoOutsideACheckout(t *testing.T) {
	t.Chdir(t.TempDir())
	cmd := demoCommand()
	cmd.PersistentFlags().StringP("config", "f", "webhookd.yaml", "")
	cfg, err := demoConfig(cmd)
	if err != nil {
		t.Fatalf("demo outside a checkout: %v", err)
	}
	if len(cfg.Process.Sources.Specs) == 0 || cfg.Path != "" {
		t.Errorf("demo's built-in configuration: %d sources, path %q; want the example's sources and no file to reload", len(cfg.Process.Sources.Specs), cfg.Path)
	}
	if !strings.Contains(cmd.Long, webhookd.ExampleConfigPath) || !strings.Contains(cmd.Long, "built-in") {
		t.Errorf("demo --help does not say what it reads: %q", cmd.Long)
	}
}
