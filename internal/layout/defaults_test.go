package layout

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// defaultLiterals are the defaults issue 24 found written several times,
// each with the one place it may be written: every other reader names
// the constant.
var defaultLiterals = []struct {
	name, home string
	re         *regexp.Regexp
}{
	{"the lease default (2m)", "dedupe/claim.go", regexp.MustCompile(`(?i)lease\w*\s*(=|:)\s*2\s*\*\s*time\.Minute`)},
	{"the retention default (720h)", "dedupe/retention.go", regexp.MustCompile(`720\s*\*\s*time\.Hour`)},
	{"the body limit default (1 MiB)", "gateway/server.go", regexp.MustCompile(`(?i)maxbodybytes\w*\s*=\s*1\s*<<\s*20`)},
}

// TestEachDefaultWrittenOnce: the product's non-test Go writes each of
// these defaults once, in its home; a second copy is how defaults drift.
func TestEachDefaultWrittenOnce(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-f", `{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}`, module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, err := exec.Command("go", "list", "-f", "{{.Dir}}", module).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	base := strings.TrimSpace(string(root))
	found := make([][]string, len(defaultLiterals))
	for _, file := range strings.Fields(string(out)) {
		rel, _ := filepath.Rel(base, file)
		if strings.HasPrefix(rel, "bench/") || strings.HasPrefix(rel, "internal/testkit/") {
			continue
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, d := range defaultLiterals {
			for range d.re.FindAllIndex(b, -1) {
				found[i] = append(found[i], rel)
			}
		}
	}
	for i, d := range defaultLiterals {
		if len(found[i]) != 1 || found[i][0] != d.home {
			t.Errorf("%s is written in %v; want it once, in %s", d.name, found[i], d.home)
		}
	}
}
