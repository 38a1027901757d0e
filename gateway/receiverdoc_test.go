package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/jobs"
)

// receiverExample returns the Go code block of docs/destinations.md that
// follows its "receiver example" marker.
func receiverExample(t *testing.T) []byte {
	t.Helper()
	doc, err := os.ReadFile("../docs/destinations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := bytes.Cut(doc, []byte("<!-- receiver example"))
	if !ok {
		t.Fatal("docs/destinations.md has no receiver example marker")
	}
	_, rest, ok = bytes.Cut(rest, []byte("```go\n"))
	code, _, closed := bytes.Cut(rest, []byte("\n```"))
	if !ok || !closed {
		t.Fatal("docs/destinations.md: no ```go block after the receiver example marker")
	}
	return code
}

// TestReceiverExample builds the receiver of docs/destinations.md as
// written and runs it as a destination with signing_secret: a real
// worker's call passes its signature check and is acted on once, with the
// event's id and type; a call with a bad signature is refused with a 401.
func TestReceiverExample(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), receiverExample(t), 0o600); err != nil {
		t.Fatal(err)
	}
	// As the doc says: a module of its own (method patterns in
	// http.ServeMux need go 1.22 or later).
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module receiver\n\ngo 1.22\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "receiver")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false", "GOTOOLCHAIN=local")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the documented receiver: %v\n%s", err, out)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	const secret = "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	ctx, cancel := context.WithCancel(context.Background())
	run := exec.CommandContext(ctx, bin)
	run.Env = append(os.Environ(), "LISTEN="+addr, "SIGNING_SECRET="+secret)
	stdout, err := run.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = run.Wait() })
	var (
		mu    sync.Mutex
		lines []string
	)
	go func() {
		for sc := bufio.NewScanner(stdout); sc.Scan(); {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
		}
	}()
	url := "http://" + addr + "/hooks"
	pipelinetest.Eventually(t, 10*time.Second, "the receiver to listen", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	})

	p := pipelinetest.Start(t, pipelinetest.Options{Sources: []pipelinetest.SourceSpec{{
		Name:         pipelinetest.Source,
		Verify:       verify.Config{Scheme: verify.SchemeStripe, Secrets: []string{pipelinetest.Secret}},
		Destinations: map[string]string{"app": url},
		Tune:         func(d *jobs.DestinationSpec) { d.SigningSecret = secret },
	}}})
	if code, answer := p.Send(t, eventBody("evt_doc")); code != http.StatusAccepted {
		t.Fatalf("%d %s", code, answer)
	}
	want := `event evt_doc of type "charge.succeeded" from stripe, call 1`
	pipelinetest.Eventually(t, 15*time.Second, "the receiver to act on the event", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(lines) > 0
	})
	pipelinetest.Eventually(t, 10*time.Second, "the run to be done", func() bool {
		return p.Schema.Int(t, `SELECT count(*) FROM job_runs WHERE key = 'stripe:app:evt_doc' AND status = 'done'`) == 1
	})
	mu.Lock()
	got := strings.Join(lines, "\n")
	mu.Unlock()
	if got != want {
		t.Errorf("the receiver printed %q, want %q", got, want)
	}

	resp, err := http.Post(url, "application/json", strings.NewReader(`{"id":"evt_forged"}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("unsigned call: %d, want 401", resp.StatusCode)
	}
}
