package jobs

import (
	"os/exec"
	"strings"
	"testing"
)

// TestAsynqVersion fails when the Asynq the module builds with is not the
// release whose storage format asynqformat.go was verified against: check
// the format again (Asynq's internal/rdb and internal/base), then update
// asynqVerifiedVersion.
func TestAsynqVersion(t *testing.T) {
	t.Parallel()
	// A test binary's build info lists no dependencies; the go tool knows
	// the version the build selected, and the replacement if any.
	out, err := exec.Command("go", "list", "-m", "-f", "{{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}", "github.com/hibiken/asynq").Output()
	if err != nil {
		t.Fatalf("go list -m github.com/hibiken/asynq: %v", err)
	}
	if linked := strings.TrimSpace(string(out)); linked != asynqVerifiedVersion {
		t.Fatalf("the module builds with Asynq %s; asynqformat.go writes the format of %s", linked, asynqVerifiedVersion)
	}
}
