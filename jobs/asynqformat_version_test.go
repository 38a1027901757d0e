package jobs

import (
	"os/exec"
	"strings"
	"testing"
)

// TestAsynqVersion fails when the Asynq the module links is not the
// release whose private storage format asynqformat.go writes: check that
// file against the new release's internal/rdb and internal/base, run the
// differential tests, and update asynqVerifiedVersion.
func TestAsynqVersion(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-m", "-f", "{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}", "github.com/hibiken/asynq").Output()
	if err != nil {
		t.Fatalf("go list -m github.com/hibiken/asynq: %v", err)
	}
	if linked := strings.TrimSpace(string(out)); linked != asynqVerifiedVersion {
		t.Fatalf("the module links Asynq %s; asynqformat.go was verified against %s", linked, asynqVerifiedVersion)
	}
}
