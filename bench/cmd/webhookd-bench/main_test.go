package main

import (
	"os"
	"testing"

	"github.com/webhookd/webhookd/internal/testkit/redistest"
)

// TestMain stops the redis-server the tests start.
func TestMain(m *testing.M) {
	os.Exit(redistest.Main(m))
}
