// Package layout checks the package dependency direction of STYLE.md.
//
// This test is the one place the direction is stated. golangci-lint's
// depguard used to state it a second time; the copies drifted (depguard
// knew nothing of cmd or the test helpers), so .golangci.yaml no longer
// configures depguard. The test wins over a lint rule because it runs in
// every `go test ./...`, the command developers and CI both run, needs no
// other tool, and reads the package graph from `go list`, so it can state
// rules about importers (only cmd imports the root package) and about
// production code versus test helpers, which per-file deny lists cannot.
package layout

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/webhookd/webhookd"

type pkg struct {
	ImportPath string
	Imports    []string // non-test imports only: tests may import anything
}

// A rule denies the packages matched by from the imports matched by deny,
// except those matched by allow, directly or through any chain of
// non-test imports (dedupe → internal/glob → gateway/… breaks the rule
// for dedupe as much as a direct import would). A pattern is an import
// path, "." for the module root, or a path ending in "/..." for it and
// every package below it; paths not starting with a domain are inside the
// module.
type rule struct {
	from  string
	deny  []string
	allow []string
	why   string
}

const (
	echo     = "github.com/labstack/echo/..."
	asynq    = "github.com/hibiken/asynq/..."
	asynqmon = "github.com/hibiken/asynqmon/..."
	plotting = "gonum.org/v1/plot/..."
	// leaves are the product packages below every layer: they import
	// nothing of ours but each other.
	leaves = "internal/..."
	// testkit is the test-support tree: only tests and tools import it.
	testkit = "internal/testkit/..."
	// bench is the load generator's own module (bench/go.mod).
	bench = "bench/..."
)

var rules = []rule{
	{
		from: "dedupe/...", deny: []string{"gateway/...", "jobs/...", "cmd/...", ".", echo, asynq, asynqmon},
		why: "storage knows neither the HTTP nor the queue side; Echo types stop at gateway, Asynq types at jobs",
	},
	{
		from: "jobs/...", deny: []string{"gateway/...", "cmd/...", ".", echo}, allow: []string{"gateway/verify", "gateway/eventid"},
		why: "jobs never imports gateway, only its leaves gateway/verify (to sign what it forwards) and gateway/eventid (to read fair_by's value as the gateway reads ids); Echo types stop at gateway",
	},
	{
		from: "gateway/verify", deny: []string{"..."}, allow: []string{leaves},
		why: "gateway/verify is a leaf that jobs may use, so it imports none of our packages but the leaves under internal/",
	},
	{
		from: "gateway/eventid", deny: []string{"..."}, allow: []string{leaves},
		why: "gateway/eventid is a leaf that jobs may use, so it imports none of our packages but the leaves under internal/",
	},
	{
		from: leaves, deny: []string{"..."}, allow: []string{leaves},
		why: "internal/ holds the leaves under every layer: they import nothing of ours but each other",
	},
	{from: "gateway/...", deny: []string{"cmd/...", "."}, why: "gateway is below the assembly; nothing imports cmd"},
	{from: "migrations/...", deny: []string{"..."}, why: "migrations imports none of our packages"},
	{from: "config", deny: []string{"cmd/..."}, why: "the configuration is below the commands"},
	{from: ".", deny: []string{"cmd/..."}, why: "the root package assembles a process; nothing imports cmd"},
}

// isProduct reports whether path is part of the product: the module's
// packages but the test-support tree, this test's package and the bench
// module.
func isProduct(path string) bool {
	return matches("...", path) && !matches(testkit, path) && !matches("internal/layout", path) && !matches(bench, path)
}

// TestDependencyDirection checks every product package's non-test
// imports, direct and transitive, against rules, and three rules about
// importers: only cmd, the bench module and the test-support tree import
// the root package; product code never imports test support; and only
// the bench module draws pictures (gonum/plot).
func TestDependencyDirection(t *testing.T) {
	t.Parallel()
	graph := importGraph(t)
	for path, imports := range graph {
		if !isProduct(path) {
			continue
		}
		for _, r := range rules {
			if !matches(r.from, path) {
				continue
			}
			for dep, via := range reachable(graph, path) {
				if matchesAny(r.deny, dep) && !matchesAny(r.allow, dep) {
					t.Errorf("%s imports %s%s: %s", path, dep, via, r.why)
				}
			}
		}
		for _, imp := range imports {
			if imp == module && !matches("cmd/...", path) && !matches("config", path) {
				t.Errorf("%s imports the root package %s: only cmd, config (which builds the process's configuration), the bench module (which starts a process as cmd does) and tests do", path, imp)
			}
			if matches(testkit, imp) {
				t.Errorf("%s imports the test support package %s: production code never does", path, imp)
			}
			if matches(plotting, imp) {
				t.Errorf("%s imports %s: only the bench module draws pictures, so the product carries no plotting library", path, imp)
			}
		}
	}
	if len(graph) < 5 {
		t.Fatalf("only %d packages listed", len(graph))
	}
}

// importGraph lists the module's packages (the bench module's too: the
// repository's go.work uses both) with their non-test imports.
func importGraph(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	graph := map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			return graph
		} else if err != nil {
			t.Fatal(err)
		}
		graph[p.ImportPath] = p.Imports
	}
}

// reachable returns every package from imports, directly or through the
// module's packages, each with the chain that reaches it ("" when
// direct, else " (via a → b)").
func reachable(graph map[string][]string, from string) map[string]string {
	seen := map[string]string{}
	var walk func(path string, chain []string)
	walk = func(path string, chain []string) {
		for _, imp := range graph[path] {
			if _, ok := seen[imp]; ok {
				continue
			}
			via := ""
			if len(chain) > 0 {
				via = " (via " + strings.Join(chain, " → ") + ")"
			}
			seen[imp] = via
			if _, ours := graph[imp]; ours {
				walk(imp, append(chain[:len(chain):len(chain)], strings.TrimPrefix(imp, module+"/")))
			}
		}
	}
	walk(from, nil)
	return seen
}

// TestProductLinksNoTestSupport checks, through go list -deps, that the
// webhookd binary links no test-support package, whatever imports it.
func TestProductLinksNoTestSupport(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", module+"/cmd/webhookd").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for dep := range strings.Lines(string(out)) {
		if dep = strings.TrimSpace(dep); matches(testkit, dep) || matches(bench, dep) {
			t.Errorf("cmd/webhookd depends on %s", dep)
		}
	}
}

// TestProductDrawsNothing checks that the product binary does not link a
// plotting library, even through a dependency: only the bench module
// carries gonum/plot.
func TestProductDrawsNothing(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", module+"/cmd/webhookd").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for dep := range strings.Lines(string(out)) {
		if dep = strings.TrimSpace(dep); matches(plotting, dep) {
			t.Errorf("cmd/webhookd depends on %s", dep)
		}
	}
}

// TestMatches pins the pattern forms the rules use.
func TestMatches(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		givenPattern, givenPath string
		expect                  bool
	}{
		{"jobs/...", module + "/jobs", true},
		{"jobs/...", module + "/jobs/sub", true},
		{"jobs/...", module + "/jobsx", false},
		{"gateway/verify", module + "/gateway/verify", true},
		{"gateway/verify", module + "/gateway/verify/sub", false},
		{testkit, module + "/internal/testkit/pgtest", true},
		{leaves, module + "/internal/testkit/pgtest", true},
		{".", module, true},
		{".", module + "/jobs", false},
		{"...", module, true},
		{"...", module + "/dedupe", true},
		{"...", "github.com/webhookd/webhookdx", false},
		{echo, "github.com/labstack/echo/v4/middleware", true},
		{asynq, "github.com/hibiken/asynqmon", false},
		{plotting, "gonum.org/v1/plot/vg/draw", true},
	} {
		if got := matches(tc.givenPattern, tc.givenPath); got != tc.expect {
			t.Errorf("matches(%q, %q) = %v, want %v", tc.givenPattern, tc.givenPath, got, tc.expect)
		}
	}
}

// matches reports whether path is matched by pattern (see rule).
func matches(pattern, path string) bool {
	if pattern == "." {
		pattern = module
	} else if first, _, _ := strings.Cut(pattern, "/"); pattern == "..." || !strings.Contains(first, ".") {
		pattern = module + "/" + pattern
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}

func matchesAny(patterns []string, path string) bool {
	for _, p := range patterns {
		if matches(p, path) {
			return true
		}
	}
	return false
}
