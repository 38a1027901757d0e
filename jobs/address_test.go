package jobs

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

// TestTransportRefusesLinkLocal: the destinations' transport refuses to
// dial a link-local or metadata address (whatever name resolved to it)
// unless allowed; with the opt-in it dials (and here finds no one).
func TestTransportRefusesLinkLocal(t *testing.T) {
	t.Parallel()
	for _, allow := range []bool{false, true} {
		client := &http.Client{Transport: NewTransport(allow), Timeout: 2 * time.Second}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://169.254.169.254:9/latest/meta-data/", nil)
		_, err := client.Do(req)
		cancel()
		if got := errors.Is(err, ErrLinkLocalDestination); got == allow {
			t.Errorf("allow %v: error %v; refused by the guard: %v", allow, err, got)
		}
	}
	// Loopback and private addresses are destinations like any other.
	if err := guardDial("tcp", "127.0.0.1:80", nil); err != nil {
		t.Errorf("loopback refused: %v", err)
	}
	if err := guardDial("tcp", "10.1.2.3:443", nil); err != nil {
		t.Errorf("a private address refused: %v", err)
	}
	if err := guardDial("tcp", "[fd00:ec2::254]:80", nil); !errors.Is(err, ErrLinkLocalDestination) {
		t.Errorf("EC2's IPv6 metadata address: %v", err)
	}
}
