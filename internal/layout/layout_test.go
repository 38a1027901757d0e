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
// except those matched by allow. A pattern is an import path, "." for
// the module root, or a path ending in "/..." for it and every package
// below it; paths not starting with a domain are inside the module.
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
)

var rules = []rule{
	{
		from: "dedupe/...", deny: []string{"gateway/...", "jobs/...", "cmd/...", echo, asynq, asynqmon},
		why: "storage knows neither the HTTP nor the queue side; Echo types stop at gateway, Asynq types at jobs",
	},
	{
		from: "jobs/...", deny: []string{"gateway/...", "cmd/...", echo}, allow: []string{"gateway/verify"},
		why: "jobs never imports gateway, only its leaf gateway/verify (to sign what it forwards); Echo types stop at gateway",
	},
	{
		from: "gateway/verify", deny: []string{"..."}, allow: []string{"gateway/jsonlimit"},
		why: "gateway/verify is a leaf that jobs may use, so it imports none of our packages but the leaf gateway/jsonlimit",
	},
	{
		from: "gateway/jsonlimit", deny: []string{"..."},
		why: "gateway/jsonlimit is a leaf under every JSON reader, so it imports none of our packages",
	},
	{from: "gateway/...", deny: []string{"cmd/..."}, why: "nothing imports cmd"},
	{from: "migrations/...", deny: []string{"..."}, why: "migrations imports none of our packages"},
	{from: ".", deny: []string{"cmd/..."}, why: "the root package assembles a process; nothing imports cmd"},
}

// isTestHelper reports whether path is a test helper package: one under
// internal/ whose name ends in "test" (pgtest, redistest, …).
func isTestHelper(path string) bool {
	return matches("internal/...", path) && strings.HasSuffix(path, "test")
}

// TestDependencyDirection checks every package's non-test imports against
// rules, and three rules about importers: only cmd, the load generator and
// tests (test helpers included) import the root package, production code
// never imports a test helper, and only the load generator's command
// draws pictures (gonum/plot).
func TestDependencyDirection(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-json", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	checked := 0
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range p.Imports {
			for _, r := range rules {
				if matches(r.from, p.ImportPath) && matchesAny(r.deny, imp) && !matchesAny(r.allow, imp) {
					t.Errorf("%s imports %s: %s", p.ImportPath, imp, r.why)
				}
			}
			if imp == module && !matches("cmd/...", p.ImportPath) && !isTestHelper(p.ImportPath) && !matches("internal/loadgen", p.ImportPath) {
				t.Errorf("%s imports the root package %s: only cmd, the load generator (which starts a process as cmd does) and tests do", p.ImportPath, imp)
			}
			if isTestHelper(imp) && !isTestHelper(p.ImportPath) {
				t.Errorf("%s imports the test helper %s: production code never does", p.ImportPath, imp)
			}
			if matches(plotting, imp) && !matches("cmd/webhookd-bench", p.ImportPath) {
				t.Errorf("%s imports %s: only cmd/webhookd-bench draws pictures, so the product carries no plotting library", p.ImportPath, imp)
			}
		}
	}
	if checked < 5 {
		t.Fatalf("only %d packages listed", checked)
	}
}

// TestProductDrawsNothing checks that the product binary does not link a
// plotting library, even through a dependency: the go.mod carries
// gonum/plot for webhookd-bench's --plot only.
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
