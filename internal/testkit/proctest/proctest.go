// Package proctest runs real webhookd processes for fault tests: it builds
// the binary once per test binary, writes a config file per test, starts
// gateway and worker processes on their own ports, waits for /readyz,
// kills or stops them, and routes their logs to the test on failure. It
// also runs a test-owned redis-server on its own port and a TCP proxy
// that a test can cut to make Postgres unreachable.
//
// A missing prerequisite (the go tool, redis-server) fails the test with
// a message; nothing here skips.
package proctest

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/testkit/freeport"
	"github.com/webhookd/webhookd/internal/testkit/logtest"
	"github.com/webhookd/webhookd/internal/testkit/redistest"
)

// Package is the import path of the webhookd command.
const Package = "github.com/webhookd/webhookd/cmd/webhookd"

var (
	buildMu  sync.Mutex
	builds   = map[string]*buildResult{}
	buildDir string
)

type buildResult struct {
	once sync.Once
	path string
	err  error
}

// Binary returns the path of the webhookd binary built with the given
// build tags (none for the normal build). Each tag set is built once per
// test binary (different tag sets build in parallel); [Main] removes the
// builds when the tests end.
func Binary(tb testing.TB, tags ...string) string {
	tb.Helper()
	key := strings.Join(tags, ",")
	buildMu.Lock()
	if buildDir == "" {
		dir, err := os.MkdirTemp("", "webhookd-proctest-")
		if err != nil {
			buildMu.Unlock()
			tb.Fatalf("error creating build dir: %v", err)
		}
		buildDir = dir
	}
	b, ok := builds[key]
	if !ok {
		b = &buildResult{}
		builds[key] = b
	}
	dir := buildDir
	buildMu.Unlock()
	b.once.Do(func() { b.path, b.err = build(tb, dir, key) })
	if b.err != nil {
		tb.Fatal(b.err)
	}
	return b.path
}

func build(tb testing.TB, dir, tags string) (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("the go tool is needed to build webhookd for fault tests: %w", err)
	}
	name := "webhookd"
	if tags != "" {
		name += "-" + strings.ReplaceAll(tags, ",", "-")
	}
	path := filepath.Join(dir, name)
	args := []string{"build", "-o", path}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	args = append(args, Package)
	start := time.Now()
	out, err := exec.Command(goTool, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("error building webhookd (go %s): %v\n%s", strings.Join(args, " "), err, out)
	}
	tb.Logf("built %s in %s", name, time.Since(start).Round(time.Millisecond))
	return path, nil
}

// Main runs the tests through redistest.Main (which stops the Redis the
// tests start) and removes the binaries Binary built. Call it from
// TestMain: os.Exit(proctest.Main(m)).
func Main(m *testing.M) int {
	code := redistest.Main(m)
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	return code
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago,
// picked outside the range outgoing connections take theirs from.
func FreePort(tb testing.TB) int {
	tb.Helper()
	port, err := freeport.Pick()
	if err != nil {
		tb.Fatalf("error finding a free port: %v", err)
	}
	return port
}

// WriteConfig writes a webhookd YAML config into the test's temp dir and
// returns its path.
func WriteConfig(tb testing.TB, yaml string) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "webhookd.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		tb.Fatalf("error writing config: %v", err)
	}
	return path
}

// Process is a running subprocess whose output is kept for the test.
type Process struct {
	// Name labels the process in the test log.
	Name string
	// Addr is the host:port it serves HTTP on, for webhookd processes.
	Addr string

	tb   testing.TB
	cmd  *exec.Cmd
	logs *logtest.Buffer
	done chan struct{}
	err  error // set when done closes
}

// overriddenEnv are environment variables webhookd reads over its config
// file, and those that turn tracing on; a test's process must take its
// settings from the file (and the test's own environment) only.
var overriddenEnv = []string{"DATABASE_URL=", "REDIS_URL=", "WEBHOOKD_LISTEN=", "WEBHOOKD_ADMIN_TOKEN=",
	"OTEL_TRACES_EXPORTER=", "OTEL_EXPORTER_OTLP_ENDPOINT=", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=", "OTEL_SDK_DISABLED="}

// StartProcess starts bin with args and extra environment (NAME=value).
// When the test ends the process is killed if still running, and on
// failure its output goes to the test log.
func StartProcess(tb testing.TB, name, bin string, args []string, env ...string) *Process {
	tb.Helper()
	return startProcess(tb, name, exec.Command(bin, args...), env...)
}

// startProcess starts cmd as StartProcess does; the caller may have set
// its directory and credentials.
func startProcess(tb testing.TB, name string, cmd *exec.Cmd, env ...string) *Process {
	tb.Helper()
	bin := cmd.Path
	var base []string
	for _, kv := range os.Environ() {
		keep := true
		for _, o := range overriddenEnv {
			if strings.HasPrefix(kv, o) {
				keep = false
			}
		}
		if keep {
			base = append(base, kv)
		}
	}
	cmd.Env = append(base, env...)
	p := &Process{Name: name, tb: tb, cmd: cmd, logs: &logtest.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	if err := cmd.Start(); err != nil {
		tb.Fatalf("error starting %s (%s): %v", name, bin, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	tb.Cleanup(func() {
		p.Kill()
		if tb.Failed() {
			tb.Logf("----- output of %s -----\n%s----- end of %s -----", name, p.logs.String(), name)
		}
	})
	return p
}

// StartWebhookd starts `webhookd <role> --config <config>` listening on a
// free port (WEBHOOKD_LISTEN is set from it) and waits until /readyz
// answers 200.
func StartWebhookd(tb testing.TB, name, bin, role, config string, env ...string) *Process {
	tb.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(FreePort(tb))
	p := StartProcess(tb, name, bin, []string{role, "--config", config}, append(env, "WEBHOOKD_LISTEN="+addr)...)
	p.Addr = addr
	tb.Cleanup(func() {
		p.Kill()
		logtest.CheckProcessLog(tb, name, p.logs.String())
	})
	p.WaitReady(30 * time.Second)
	return p
}

// URL returns the process's base URL.
func (p *Process) URL() string { return "http://" + p.Addr }

// WaitReady waits until GET /readyz answers 200, failing the test if the
// process exits or the time runs out.
func (p *Process) WaitReady(within time.Duration) {
	p.tb.Helper()
	deadline := time.Now().Add(within)
	client := &http.Client{Timeout: time.Second}
	for {
		resp, err := client.Get(p.URL() + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-p.done:
			p.tb.Fatalf("%s exited before it was ready: %v\n%s", p.Name, p.err, p.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			p.tb.Fatalf("%s not ready within %s (last error %v)", p.Name, within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Process) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Terminate sends SIGTERM and waits up to within for a clean exit, then
// kills. It returns the exit error (nil for a clean exit).
func (p *Process) Terminate(within time.Duration) error {
	p.tb.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(within):
		p.tb.Errorf("%s did not stop within %s of SIGTERM; killing it", p.Name, within)
		p.Kill()
		return p.err
	}
}

// Wait waits up to within for the process to exit by itself and returns
// its exit code.
func (p *Process) Wait(within time.Duration) int {
	p.tb.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		p.tb.Fatalf("%s still running after %s", p.Name, within)
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	return 0
}

// Logs returns what the process printed so far.
func (p *Process) Logs() string { return p.logs.String() }

// Redis is a test-owned redis-server on its own port, without
// persistence, that the test can stop and start again on the same port.
type Redis struct {
	// Port is the server's port on 127.0.0.1.
	Port int
	// URL is redis://127.0.0.1:<Port>/0.
	URL string

	tb  testing.TB
	bin string
	n   int
	cur *Process
}

// StartRedis starts a redis-server on a free port. It fails the test when
// redis-server is not installed.
func StartRedis(tb testing.TB) *Redis {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		tb.Fatalf("redis-server is needed for this fault test (apt-get install redis-server): %v", err)
	}
	port := FreePort(tb)
	r := &Redis{Port: port, URL: fmt.Sprintf("redis://127.0.0.1:%d/0", port), tb: tb, bin: bin}
	r.Start()
	return r
}

// Start starts the server (again) on its port and waits until it answers.
func (r *Redis) Start() {
	r.tb.Helper()
	r.n++
	r.cur = StartProcess(r.tb, fmt.Sprintf("redis-server#%d", r.n), r.bin, []string{
		"--port", strconv.Itoa(r.Port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no",
	})
	waitRedis(r.tb, fmt.Sprintf("127.0.0.1:%d", r.Port), r.cur.Logs)
}

// Stop stops the server; its data is gone.
func (r *Redis) Stop() {
	r.tb.Helper()
	if r.cur != nil {
		r.cur.Kill()
	}
}

// Freeze stops the server with SIGSTOP: it keeps its connections and
// answers nothing, as a hung Redis does (not refusing, as a stopped one
// does), until Thaw or the test's end.
func (r *Redis) Freeze() {
	r.tb.Helper()
	r.cur.Signal(syscall.SIGSTOP)
	r.tb.Cleanup(r.Thaw)
}

// Thaw lets a frozen server go on (SIGCONT).
func (r *Redis) Thaw() {
	r.cur.Signal(syscall.SIGCONT)
}

// Signal sends sig to the process (SIGQUIT stops Postgres at once, as a
// crash would).
func (p *Process) Signal(sig os.Signal) {
	_ = p.cmd.Process.Signal(sig)
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// PeakRSS returns the largest resident set the process has had (VmHWM in
// /proc/<pid>/status), in bytes. It fails the test where /proc is not
// readable.
func (p *Process) PeakRSS() int64 {
	p.tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		p.tb.Fatalf("error reading %s's memory: %v", p.Name, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				p.tb.Fatalf("error reading %s's VmHWM %q: %v", p.Name, rest, err)
			}
			return kb << 10
		}
	}
	p.tb.Fatalf("no VmHWM in %s's /proc status", p.Name)
	return 0
}
