// Package natstest starts a nats-server with JetStream of a test's own:
// on free loopback ports, its store in a temporary directory, so the test
// may stop it and start it again (a broker outage) and count its
// connections. The shared server on 127.0.0.1:4222 is never touched.
package natstest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/testkit/freeport"
)

// Server is a test's own nats-server.
type Server struct {
	// URL is its client URL, nats://127.0.0.1:<port>.
	URL     string
	monitor string
	args    []string
	cmd     *exec.Cmd
}

// New starts a server, stopped when the test ends.
func New(tb testing.TB) *Server {
	tb.Helper()
	port, mport := freePort(tb), freePort(tb)
	s := &Server{
		URL: fmt.Sprintf("nats://127.0.0.1:%d", port), monitor: fmt.Sprintf("http://127.0.0.1:%d", mport),
		args: []string{"-a", "127.0.0.1", "-p", fmt.Sprint(port), "-m", fmt.Sprint(mport), "-js", "-sd", tb.TempDir()},
	}
	s.Start(tb)
	tb.Cleanup(s.Stop)
	return s
}

func freePort(tb testing.TB) int {
	tb.Helper()
	port, err := freeport.Pick()
	if err != nil {
		tb.Fatal(err)
	}
	return port
}

// Start runs the server (again, on the same ports and store) and waits
// until JetStream answers.
func (s *Server) Start(tb testing.TB) {
	tb.Helper()
	s.cmd = exec.Command("nats-server", s.args...)
	if err := s.cmd.Start(); err != nil {
		tb.Fatalf("nats-server (Debian's nats-server package): %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(s.monitor + "/healthz?js-enabled-only=true")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("nats-server did not answer within 10s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop kills the server: a broker gone without a goodbye.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// Clients counts the connections named name (the monitor's /connz).
func (s *Server) Clients(tb testing.TB, name string) int {
	tb.Helper()
	resp, err := http.Get(s.monitor + "/connz")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var connz struct {
		Connections []struct {
			Name string `json:"name"`
		} `json:"connections"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&connz); err != nil {
		tb.Fatal(err)
	}
	n := 0
	for _, c := range connz.Connections {
		if c.Name == name {
			n++
		}
	}
	return n
}
