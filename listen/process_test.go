package listen_test

// Process tests: real webhookd gateways (the binary, on the test's own
// Postgres schema and Redis), `webhookd listen` as a process, and a local
// app that is a real HTTP server the test can take down.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/internal/testkit/proctest"
	"github.com/webhookd/webhookd/listen"
)

func TestMain(m *testing.M) {
	os.Exit(proctest.Main(m))
}

// Tokens of the test gateways: listen uses the read-only one.
const (
	fullToken = "listen-test-full-token-0123456789"
	roToken   = "listen-test-read-only-token-0123456"
)

// gatewayConfig is a gateway's YAML config with the given sources block
// (list items, indented two spaces).
func gatewayConfig(databaseURL, redisURL, queue, sources string) string {
	return fmt.Sprintf(`database_url: %q
redis_url: %q
queue: %q
admin_token: %s
admin:
  read_only_tokens: [%s]
sources:
%s`, databaseURL, redisURL, queue, fullToken, roToken, sources)
}

// unsignedSource is a source "test" that takes unsigned JSON events
// (id and type in the body); its one destination is never called (the
// tests run no worker).
const unsignedSource = `  - name: test
    verify:
      scheme: none
      allow_unsigned: true
    event_id: json:id
    event_type: json:type
    destinations:
      - name: sink
        url: http://127.0.0.1:9/unused
`

var sendClient = &http.Client{Timeout: 15 * time.Second}

// send posts an unsigned event id to the gateway's source "test" and
// returns the status (0 when no answer came).
func send(gatewayURL, id string) int {
	resp, err := sendClient.Post(gatewayURL+"/webhooks/test", "application/json",
		strings.NewReader(fmt.Sprintf(`{"id":%q,"type":"listen.test"}`, id)))
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// received is one request the local app got.
type received struct {
	key, eventID, attempt string
	status                int
	at                    time.Time
}

// localApp is the developer's app: a real HTTP server on a fixed
// loopback port that the test can stop (connection refused) and start
// again. answer decides each request's status (200 when nil).
type localApp struct {
	t      *testing.T
	addr   string
	answer func(r *http.Request, body []byte) int
	mu     sync.Mutex
	reqs   []received
	srv    *http.Server
}

func startLocalApp(t *testing.T, answer func(r *http.Request, body []byte) int) *localApp {
	t.Helper()
	a := &localApp{t: t, addr: fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t)), answer: answer}
	a.start()
	t.Cleanup(a.stop)
	return a
}

// URL is where listen forwards to.
func (a *localApp) URL() string { return "http://" + a.addr + "/webhooks" }

func (a *localApp) start() {
	a.t.Helper()
	var (
		l   net.Listener
		err error
	)
	for range 50 { // the port may linger a moment after stop
		if l, err = net.Listen("tcp", a.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		a.t.Fatalf("local app: %v", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(a.serve)}
	a.mu.Lock()
	a.srv = srv
	a.mu.Unlock()
	go func() { _ = srv.Serve(l) }()
}

func (a *localApp) stop() {
	a.mu.Lock()
	srv := a.srv
	a.srv = nil
	a.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

func (a *localApp) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	code := http.StatusOK
	if a.answer != nil {
		code = a.answer(r, body)
	}
	a.mu.Lock()
	a.reqs = append(a.reqs, received{key: r.Header.Get("Idempotency-Key"), eventID: r.Header.Get("Webhookd-Event-Id"),
		attempt: r.Header.Get("Webhookd-Attempt"), status: code, at: time.Now()})
	a.mu.Unlock()
	w.WriteHeader(code)
}

// requests returns every request so far, in arrival order.
func (a *localApp) requests() []received {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]received(nil), a.reqs...)
}

// keys returns how many distinct keys were answered 2xx.
func (a *localApp) keys() int {
	seen := map[string]bool{}
	for _, r := range a.requests() {
		if r.status/100 == 2 {
			seen[r.key] = true
		}
	}
	return len(seen)
}

// listenProc is a `webhookd listen` process and what it was started with.
type listenProc struct {
	*proctest.Process
	state string
}

// startListen starts `webhookd listen --json` against server, forwarding
// to forwardTo, its cursor in state, with the read-only token, and waits
// until the state file holds a cursor (it follows from there).
func startListen(t *testing.T, name, server, forwardTo, state string, extra ...string) *listenProc {
	t.Helper()
	args := append([]string{"listen", "--server", server, "--forward-to", forwardTo, "--state", state, "--json"}, extra...)
	p := proctest.StartProcess(t, name, proctest.Binary(t), args, "WEBHOOKD_ADMIN_TOKEN="+roToken)
	pipelinetest.Eventually(t, 20*time.Second, name+" to write its state file", func() bool {
		b, err := os.ReadFile(state)
		return err == nil && strings.Contains(string(b), `"cursor"`)
	})
	t.Cleanup(func() {
		if strings.Contains(p.Logs(), roToken) {
			t.Errorf("%s printed the admin token", name)
		}
	})
	return &listenProc{Process: p, state: state}
}

// eventLines returns listen's event lines so far (its --json output;
// notices are skipped).
func eventLines(t *testing.T, logs string) []listen.EventLine {
	t.Helper()
	var out []listen.EventLine
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var line listen.EventLine
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Key != "" {
			out = append(out, line)
		}
	}
	return out
}

func statePath(t *testing.T) string {
	return filepath.Join(t.TempDir(), "listen-state.json")
}
