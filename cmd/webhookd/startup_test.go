package main

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/testkit/logtest"
	"github.com/webhookd/webhookd/internal/testkit/pgtest"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/internal/testkit/proctest"
	"github.com/webhookd/webhookd/internal/testkit/redistest"
)

// TestPortTakenIsOneCleanError: every long-running command, started on a
// port another program holds, exits 1 with one error that names the
// listen setting and where it came from, having started nothing (no
// panic from a half-started worker, no line that is not JSON).
func TestPortTakenIsOneCleanError(t *testing.T) {
	t.Parallel()
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	rdb := redistest.New(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	sinkURL := fmt.Sprintf("http://127.0.0.1:%d/hooks", proctest.FreePort(t))
	yaml := fmt.Sprintf("listen: %q\n", taken.Addr().String()) + faultConfig(schema.URL, rdb.URL, rdb.Queue, sinkURL)
	config := proctest.WriteConfig(t, yaml)
	for _, command := range []string{"serve", "gateway", "worker", "demo"} {
		t.Run(command, func(t *testing.T) {
			for try := range 3 { // the issue saw the panic in 4 of 5 tries
				p := proctest.StartProcess(t, command, bin, []string{command, "-f", config})
				if code := p.Wait(30 * time.Second); code != 1 {
					t.Fatalf("try %d: exit code %d, want 1\n%s", try, code, p.Logs())
				}
				out := p.Logs()
				want := fmt.Sprintf("webhookd: %s:1: listen: cannot listen on %s", config, taken.Addr())
				if !strings.Contains(out, want) {
					t.Errorf("try %d: output does not say %q:\n%s", try, want, out)
				}
				if strings.Contains(out, "panic") || strings.Contains(out, "goroutine ") {
					t.Errorf("try %d: it panicked:\n%s", try, out)
				}
				if command != "demo" { // demo prints its admin token for humans on stderr first
					logtest.CheckProcessLog(t, command, out)
				}
			}
		})
	}
	// From the environment, the error names the variable.
	p := proctest.StartProcess(t, "gateway-env", bin, []string{"gateway", "-f", config}, "WEBHOOKD_LISTEN="+taken.Addr().String())
	if code := p.Wait(30 * time.Second); code != 1 || !strings.Contains(p.Logs(), "$WEBHOOKD_LISTEN (environment): listen: cannot listen on") {
		t.Errorf("WEBHOOKD_LISTEN on a taken port: exit %d\n%s", code, p.Logs())
	}
}

// TestDependencyStateLines: with Redis stopped under a running process,
// the log says once that Redis is unreachable and what that means, and
// once that it is back; go-redis's and Asynq's own complaints meanwhile
// are JSON lines, a few of each kind, not one per retry.
func TestDependencyStateLines(t *testing.T) {
	t.Parallel()
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	redis := proctest.StartRedis(t)
	sink := newFaultSink(t)
	config := proctest.WriteConfig(t, faultConfig(schema.URL, redis.URL, "webhookd", sink.URL))
	p := proctest.StartWebhookd(t, "serve", bin, "serve", config)

	redis.Stop()
	time.Sleep(6 * time.Second)
	redis.Start()
	pipelinetest.Eventually(t, 10*time.Second, "the process to see Redis back", func() bool {
		return strings.Contains(p.Logs(), "redis reachable again")
	})

	lines := 0
	byComponent := map[string]int{}
	for _, l := range strings.Split(p.Logs(), "\n") {
		switch {
		case strings.Contains(l, `"msg":"redis unreachable: `):
			lines++
			if !strings.Contains(l, "wait in the Postgres outbox") {
				t.Errorf("the unreachable line does not say what it means: %s", l)
			}
		case strings.Contains(l, `"component":"redis"`):
			byComponent["redis"]++
		case strings.Contains(l, `"component":"asynq"`):
			byComponent["asynq"]++
		}
	}
	if lines != 1 {
		t.Errorf("%d lines say Redis is unreachable, want 1", lines)
	}
	// Six seconds of retries: a first line of each kind and at most one
	// more per kind after 10s; a handful of kinds.
	for c, n := range byComponent {
		if n > 12 {
			t.Errorf("%d lines from %s in 6s of outage; they are not rate-limited", n, c)
		}
	}
	if !strings.Contains(p.Logs(), `"down_for":"`) {
		t.Errorf("the reachable-again line does not say for how long it was down as text")
	}
}
