package gateway_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhookd/webhookd/gateway"
)

// TestShutdownRacesServe: a shutdown that comes before, or at the same
// time as, the start of serving leaves no server listening (an early
// SIGTERM used to leave the real server running).
func TestShutdownRacesServe(t *testing.T) {
	t.Parallel()
	for range 50 {
		srv := gateway.New(gateway.Config{Registry: prometheus.NewRegistry()}, nil, nil)
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan error, 1)
		go func() { served <- srv.Serve(l) }()
		if err := srv.Shutdown(context.Background()); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
		select {
		case err := <-served:
			if err != nil {
				t.Fatalf("serve: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Serve still running after Shutdown")
		}
		if c, err := net.DialTimeout("tcp", l.Addr().String(), time.Second); err == nil {
			c.Close()
			t.Fatal("still accepting connections after Shutdown")
		}
	}
}
