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
	Imports    []string
}

// forbidden lists, per package prefix, import prefixes it must not use.
var forbidden = map[string][]string{
	module + "/dedupe":     {module + "/gateway", module + "/jobs", module + "/cmd", "github.com/labstack/echo", "github.com/hibiken/asynq"},
	module + "/jobs":       {module + "/gateway", module + "/cmd", "github.com/labstack/echo"},
	module + "/gateway":    {module + "/cmd"},
	module + "/migrations": {module + "/"},
}

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
			for prefix, banned := range forbidden {
				if p.ImportPath != prefix && !strings.HasPrefix(p.ImportPath, prefix+"/") {
					continue
				}
				for _, b := range banned {
					if strings.HasPrefix(imp, b) {
						t.Errorf("%s imports %s", p.ImportPath, imp)
					}
				}
			}
			// Production code never imports test helpers (…test packages).
			if strings.HasPrefix(imp, module+"/internal/") && strings.HasSuffix(imp, "test") &&
				!strings.HasSuffix(p.ImportPath, "test") {
				t.Errorf("%s imports the test helper %s", p.ImportPath, imp)
			}
		}
	}
	if checked < 5 {
		t.Fatalf("only %d packages listed", checked)
	}
}
