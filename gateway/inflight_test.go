package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway"
	"github.com/webhookd/webhookd/gateway/eventid"
	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/testkit/logtest"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
)

// acceptAll records nothing and answers every event as new.
type acceptAll struct{}

func (acceptAll) Record(context.Context, dedupe.Event) (dedupe.Recorded, error) {
	return dedupe.Recorded{Inserted: true, Deliveries: 1}, nil
}

// inflightServer serves a gateway with one stripe source on a loopback
// port and returns its address and registry.
func inflightServer(t *testing.T, cfg gateway.Config) (string, *prometheus.Registry) {
	t.Helper()
	v, err := verify.New(verify.Config{Scheme: "stripe", Secrets: []string{pipelinetest.Secret}})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := eventid.Parse("json:id")
	cfg.Sources = map[string]gateway.Source{"stripe": {Scheme: "stripe", Verifier: v, EventID: id}}
	cfg.Registry = prometheus.NewRegistry()
	cfg.Logger = logtest.New(t, slog.LevelInfo)
	srv := gateway.New(cfg, acceptAll{}, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return l.Addr().String(), cfg.Registry
}

// gauge reads a gauge of reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// stall opens a connection that declares a body of declared bytes and
// sends the first sent of them.
func stall(t *testing.T, addr string, declared, sent int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /webhooks/stripe HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", declared)
	if _, err := c.Write(bytes.Repeat([]byte("x"), sent)); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestStalledBodiesHoldWhatTheySent: 48 connections that each declare a
// 1 MiB body, send 10 bytes and stall grow the heap by what they sent and
// their buffers, not by what they declared (issue 23, L4). Before, the
// body buffer was grown to Content-Length before a byte arrived: 48 such
// connections held 48 MiB. Not parallel: it measures the heap, which the
// package's other tests would move.
func TestStalledBodiesHoldWhatTheySent(t *testing.T) {
	addr, reg := inflightServer(t, gateway.Config{MaxBodyBytes: 1 << 20})
	const conns, sent = 48, 10
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	for range conns {
		stall(t, addr, 1<<20, sent)
	}
	pipelinetest.Eventually(t, 5*time.Second, "every stalled body read as far as it was sent", func() bool {
		return gauge(t, reg, "webhookd_body_bytes_in_flight") == conns*sent
	})
	runtime.GC()
	runtime.ReadMemStats(&ms)
	grown := int64(ms.HeapAlloc) - int64(before)
	t.Logf("%d connections declaring 1 MiB each and sending %d bytes grew the heap by %d KiB", conns, sent, grown>>10)
	if grown > 8<<20 {
		t.Errorf("the heap grew by %d MiB for %d stalled connections that sent %d bytes each, want it not to grow with the declared 1 MiB", grown>>20, conns, sent)
	}
}

// post sends one signed event on a new connection and returns the status,
// 0 when the connection was refused before an answer (a connection past
// the limit may be answered before the request is written, which the
// client takes as an error).
func post(t *testing.T, addr string, id string, pad int) int {
	t.Helper()
	body := fmt.Appendf(nil, `{"id":%q,"pad":%q}`, id, strings.Repeat("p", pad))
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/webhooks/stripe", bytes.NewReader(body))
	for k, v := range signed(body) {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestBodyBudgetAnswers503: past the body bytes all requests in flight
// may hold, a request is answered 503 (the sender retries), and once the
// bytes held are given back requests are taken again (issue 23, L4).
func TestBodyBudgetAnswers503(t *testing.T) {
	t.Parallel()
	addr, reg := inflightServer(t, gateway.Config{MaxBodyBytes: 1 << 20, MaxBodyBytesInFlight: 64 << 10})
	c := stall(t, addr, 100<<10, 60<<10)
	pipelinetest.Eventually(t, 5*time.Second, "the stalled body read", func() bool {
		return gauge(t, reg, "webhookd_body_bytes_in_flight") == 60<<10
	})
	if code := post(t, addr, "evt_over_budget", 10<<10); code != http.StatusServiceUnavailable {
		t.Errorf("a 10 KiB body beside 60 KiB in flight, budget 64 KiB: answered %d, want 503", code)
	}
	c.Close()
	pipelinetest.Eventually(t, 5*time.Second, "the stalled body's bytes given back", func() bool {
		return gauge(t, reg, "webhookd_body_bytes_in_flight") == 0
	})
	if code := post(t, addr, "evt_within_budget", 10<<10); code != http.StatusAccepted {
		t.Errorf("a 10 KiB body with nothing in flight: answered %d, want 202", code)
	}
}

// TestConnectionLimit: past MaxConnections open connections, one more is
// answered 503 and closed; once one closes, connections are taken again
// (issue 23, L4). Before, connections were not bounded.
func TestConnectionLimit(t *testing.T) {
	t.Parallel()
	addr, _ := inflightServer(t, gateway.Config{MaxConnections: 4})
	var open []net.Conn
	for range 4 {
		open = append(open, stall(t, addr, 100, 1))
	}
	// Wait until the server holds all four (a request on a fifth
	// connection is refused).
	var status string
	pipelinetest.Eventually(t, 5*time.Second, "a fifth connection refused", func() bool {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		status, _ = bufio.NewReader(c).ReadString('\n')
		return strings.HasPrefix(status, "HTTP/1.1 503")
	})
	open[0].Close()
	pipelinetest.Eventually(t, 5*time.Second, "a connection taken once one closed", func() bool {
		return post(t, addr, "evt_after_close", 0) == http.StatusAccepted
	})
}
