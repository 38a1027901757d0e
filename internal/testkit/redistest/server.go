package redistest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/webhookd/webhookd/internal/testkit/freeport"
)

// serverDBs is the number of databases of the test binary's own server.
const serverDBs = 64

// server is the test binary's own redis-server.
type server struct {
	addr   string
	free   chan int // databases not leased to a test
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has exited
	output *syncBuffer
}

var (
	serverMu  sync.Mutex
	running   *server
	serverErr error // why the server could not start; every test reports it
)

// startServer returns the test binary's server, starting it on first use.
func startServer() (*server, error) {
	serverMu.Lock()
	defer serverMu.Unlock()
	if running == nil && serverErr == nil {
		running, serverErr = launchServer()
	}
	return running, serverErr
}

// stopServer stops the server if it was started.
func stopServer() {
	serverMu.Lock()
	defer serverMu.Unlock()
	if running != nil {
		running.stop()
		running = nil
	}
}

// launchServer starts redis-server on a free loopback port. A port found
// free can be taken by another process before the server binds it, so it
// tries a few.
func launchServer() (*server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redistest: the tests start their own redis-server and none is installed (Debian: apt-get install redis-server), or set TEST_REDIS_URL to a Redis dedicated to tests: %w", err)
	}
	var errs []error
	for range 5 {
		s, err := launchOn(bin)
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("redistest: %w", errors.Join(errs...))
}

func launchOn(bin string) (*server, error) {
	port, err := freeport.Pick()
	if err != nil {
		return nil, fmt.Errorf("error finding a free port: %w", err)
	}

	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--databases", strconv.Itoa(serverDBs),
		"--dir", os.TempDir(), "--daemonize", "no", "--loglevel", "warning")
	s := &server{
		addr:   net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		free:   make(chan int, serverDBs),
		cmd:    cmd,
		exited: make(chan struct{}),
		output: &syncBuffer{},
	}
	cmd.Stdout, cmd.Stderr = s.output, s.output
	dieWithTestBinary(cmd)
	started := make(chan error, 1)
	go func() {
		// On Linux the server dies with the thread that started it
		// (dieWithTestBinary): this goroutine keeps that thread until
		// the server has exited, so only the test binary's end ends it.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(s.exited)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("error starting %s: %w", bin, err)
	}
	if err := s.waitReady(); err != nil {
		s.stop()
		return nil, fmt.Errorf("redis-server on port %d: %w\n%s", port, err, s.output)
	}
	for db := range serverDBs {
		s.free <- db
	}
	return s, nil
}

// waitReady waits until the server answers on its port, and checks that
// the process answering is this server and not one that took the port.
func (s *server) waitReady() error {
	client := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1})
	defer client.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		info, err := client.Info(ctx, "server").Result()
		cancel()
		if err == nil {
			if !strings.Contains(info, "process_id:"+strconv.Itoa(s.cmd.Process.Pid)+"\r\n") {
				return errors.New("another process answers on the port")
			}
			return nil
		}
		select {
		case <-s.exited:
			return errors.New("exited before answering")
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer within 10s: %w", err)
		}
	}
}

// stop terminates the server by its pid and waits for it to exit.
func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// syncBuffer collects the server's output from its two streams.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
