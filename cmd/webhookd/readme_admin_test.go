package main

import (
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/sink"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
)

// readmeAdminCurls returns the README's curl lines that call the admin
// API (localhost:8080/admin), each with its continuation lines joined and
// its trailing comment cut.
func readmeAdminCurls(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	comment := regexp.MustCompile(`\s+#[^'"]*$`)
	var out []string
	var cur string
	for line := range strings.SplitSeq(string(readme), "\n") {
		if cur != "" {
			cur += " " + strings.TrimSpace(strings.TrimSuffix(line, `\`))
		} else if strings.HasPrefix(line, "curl ") {
			cur = strings.TrimSuffix(line, `\`)
		}
		if cur != "" && !strings.HasSuffix(line, `\`) {
			if strings.Contains(cur, "localhost:8080/admin") {
				out = append(out, comment.ReplaceAllString(strings.TrimSpace(cur), ""))
			}
			cur = ""
		}
	}
	return out
}

// TestREADMEAdminCurlLinesWork runs the README's admin curl lines, as
// written, with curl against a real webhookd (only its address put in
// for localhost:8080, and $T set to its token): each must get a 2xx
// answer, and the bulk replay must be what it asks for (not a dry run).
func TestREADMEAdminCurlLinesWork(t *testing.T) {
	t.Parallel()
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatalf("this test runs the README's curl lines: install curl (%v)", err)
	}
	dest := sink.New(nil)
	ds := httptest.NewServer(dest)
	t.Cleanup(ds.Close)
	p := pipelinetest.Start(t, pipelinetest.Options{Destinations: map[string]string{"billing": ds.URL}, AdminTokens: []string{cliToken}})
	// The README's example id, as written.
	if code, body := p.Send(t, []byte(`{"id":"evt_1Nx...","type":"invoice.paid"}`)); code != 202 {
		t.Fatalf("send: %d %s", code, body)
	}
	pipelinetest.Eventually(t, 20*time.Second, "the example event delivered", func() bool { return dest.Stats().Calls == 1 })

	lines := readmeAdminCurls(t)
	if len(lines) < 4 {
		t.Fatalf("found %d admin curl lines in README.md, want at least 4: %q", len(lines), lines)
	}
	host := strings.TrimPrefix(p.URL, "http://")
	for _, line := range lines {
		run := strings.Replace(strings.ReplaceAll(line, "localhost:8080", host), "curl ", curl+" -sS --fail-with-body ", 1)
		cmd := exec.Command("sh", "-c", run)
		cmd.Env = append(os.Environ(), "T="+cliToken)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("README line %s\nfailed: %v\n%s", line, err, out)
			continue
		}
		if strings.Contains(line, "/admin/replay") && !strings.Contains(string(out), `"dry_run":false`) {
			t.Errorf("README line %s\nanswered %s, want the replay it asks for (dry_run false)", line, out)
		}
	}
	pipelinetest.Eventually(t, 20*time.Second, "the README's forced replay delivered", func() bool {
		return dest.Count("stripe:billing:evt_1Nx...#2") == 1
	})
}
