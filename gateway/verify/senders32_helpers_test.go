package verify_test

import (
	"encoding/hex"
	"testing"

	"github.com/webhookd/webhookd/internal/testkit/sendertest"
)

// sendertestSeed is the hex seed of sendertest's Ed25519 key whose
// public key is pub.
func sendertestSeed(t *testing.T, pub string) string {
	priv, ok := sendertest.Ed25519Key(pub)
	if !ok {
		t.Fatalf("no key for %s", pub)
	}
	return hex.EncodeToString(priv.Seed())
}
