package quietlog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/quietlog"
)

// TestOneLinePerKindPerInterval: a burst of lines of one kind writes the
// first; another kind is not held back by it; after the interval the
// next line says how many were left out.
func TestOneLinePerKindPerInterval(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	q := quietlog.New(slog.New(slog.NewJSONHandler(&buf, nil)), 50*time.Millisecond)
	ctx := context.Background()
	for range 100 {
		q.Log(ctx, slog.LevelWarn, "dial", "dial tcp: connection refused")
	}
	q.Log(ctx, slog.LevelWarn, "pool", "pool timeout")
	time.Sleep(60 * time.Millisecond)
	q.Log(ctx, slog.LevelWarn, "dial", "dial tcp: connection refused")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3 (first dial, pool, dial after the interval):\n%s", len(lines), buf.String())
	}
	var last map[string]any
	if err := json.Unmarshal([]byte(lines[2]), &last); err != nil {
		t.Fatal(err)
	}
	if last["suppressed"] != float64(99) {
		t.Errorf("line after the interval: suppressed %v, want 99", last["suppressed"])
	}
	// Below the logger's level nothing is counted or written.
	buf.Reset()
	quiet := quietlog.New(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelError})), time.Hour)
	quiet.Log(ctx, slog.LevelWarn, "dial", "x")
	if buf.Len() != 0 {
		t.Errorf("a line below the level was written: %s", buf.String())
	}
}
