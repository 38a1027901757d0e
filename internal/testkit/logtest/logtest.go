// Package logtest routes test logs where a test can use them: to t.Log,
// so parallel output stays attributable, or into a buffer whose JSON
// lines a test parses to check what was logged.
package logtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
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

// CheckProcessLog fails tb for every line of a webhookd process's output
// that an operator's log pipeline would choke on: a line that is not one
// JSON object, or an object that has a key twice (most JSON decoders
// keep one of the two silently). The last line may be the command's own
// error ("webhookd: ...", written when it exits with an error).
func CheckProcessLog(tb testing.TB, name, output string) {
	tb.Helper()
	lines := strings.Split(strings.TrimRight(output, "\n"), "\n")
	for i, line := range lines {
		if line == "" || i == len(lines)-1 && strings.HasPrefix(line, "webhookd: ") {
			continue
		}
		if err := uniqueKeys(json.NewDecoder(strings.NewReader(line))); err != nil {
			tb.Errorf("%s wrote a log line that is not a JSON object with unique keys (%v): %.300s", name, err, line)
		}
	}
}

// uniqueKeys reads one JSON object from dec and reports a key that
// appears twice in it or in an object inside it.
func uniqueKeys(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("not an object")
	}
	return objectKeys(dec)
}

// objectKeys reads the rest of an object whose '{' was read.
func objectKeys(dec *json.Decoder) error {
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key := tok.(string)
		if seen[key] {
			return fmt.Errorf("key %q twice", key)
		}
		seen[key] = true
		if err := skipValue(dec); err != nil {
			return err
		}
	}
	_, err := dec.Token() // '}'
	return err
}

// skipValue reads one value, checking the objects inside it.
func skipValue(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		return objectKeys(dec)
	case json.Delim('['):
		for dec.More() {
			if err := skipValue(dec); err != nil {
				return err
			}
		}
		_, err = dec.Token() // ']'
		return err
	}
	return nil
}
