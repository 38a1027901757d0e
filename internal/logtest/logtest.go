// Package logtest routes test logs where a test can use them: to t.Log,
// so parallel output stays attributable, or into a buffer whose JSON
// lines a test parses to check what was logged.
package logtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
)

// Writer sends each write to tb.Log, without its trailing newline.
type Writer struct{ TB testing.TB }

// Write implements io.Writer.
func (w Writer) Write(p []byte) (int, error) {
	w.TB.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

// New returns a JSON logger that writes to tb.Log at level and above.
func New(tb testing.TB, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(Writer{tb}, &slog.HandlerOptions{Level: level}))
}

// Buffer collects output from many goroutines.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Lines returns every line written so far as a JSON object; a line that
// is not one fails tb.
func (b *Buffer) Lines(tb testing.TB) []map[string]any {
	tb.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader([]byte(b.String())))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			tb.Errorf("log line is not JSON: %s", sc.Text())
			continue
		}
		out = append(out, m)
	}
	return out
}
