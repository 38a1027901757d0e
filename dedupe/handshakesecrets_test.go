package dedupe_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
)

// TestLearnHandshakeSecretFirstWins races handshakes with different
// secrets for one source: every one is told the same stored secret, one
// of theirs, and a later handshake cannot replace it.
func TestLearnHandshakeSecretFirstWins(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	if got, err := b.store.HandshakeSecret(ctx, "asana"); err != nil || got != "" {
		t.Fatalf("before any handshake: %q, %v; want none", got, err)
	}
	const n = 8
	secrets := make([]string, n)
	stored := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		secrets[i] = fmt.Sprintf("secret-%d", i)
		wg.Go(func() {
			s, err := b.store.LearnHandshakeSecret(ctx, "asana", secrets[i])
			if err != nil {
				t.Error(err)
			}
			stored[i] = s
		})
	}
	wg.Wait()
	winner := stored[0]
	if !slices.Contains(secrets, winner) {
		t.Fatalf("stored %q, not one of the handshakes'", winner)
	}
	for i, s := range stored {
		if s != winner {
			t.Errorf("handshake %d was told %q, another %q", i, s, winner)
		}
	}
	if got, _ := b.store.LearnHandshakeSecret(ctx, "asana", "later"); got != winner {
		t.Errorf("a later handshake replaced the secret: %q", got)
	}
	if got, err := b.store.HandshakeSecret(ctx, "asana"); err != nil || got != winner {
		t.Errorf("HandshakeSecret = %q, %v; want %q", got, err, winner)
	}
	if got, _ := b.store.HandshakeSecret(ctx, "other"); got != "" {
		t.Errorf("another source has %q", got)
	}
}
