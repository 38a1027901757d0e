package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/pgtest"
	"github.com/webhookd/webhookd/internal/pipelinetest"
	"github.com/webhookd/webhookd/internal/proctest"
	"github.com/webhookd/webhookd/internal/redistest"
	"github.com/webhookd/webhookd/internal/sink"
)

// importLines is the size of the export the import test backfills.
const importLines = 10000

// writeExport writes importLines events, plus two bad lines and a blank
// one, and returns the path and the number of good lines.
func writeExport(t *testing.T) (string, int) {
	t.Helper()
	var b bytes.Buffer
	good := 0
	for i := 1; i <= importLines; i++ {
		switch i {
		case 1234:
			b.WriteString("{not json\n")
		case 4321:
			b.WriteString(`{"type":"invoice.paid","note":"no id"}` + "\n")
		case 7777:
			b.WriteString("\n")
		default:
			fmt.Fprintf(&b, `{"id":"evt_imp_%05d","type":"invoice.paid","data":{"object":{"id":"in_%d","amount":%d}}}`+"\n", i, i, i*10)
			good++
		}
	}
	path := filepath.Join(t.TempDir(), "export.jsonl")
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, good
}

var summaryRE = regexp.MustCompile(`(\d+) lines, (\d+) new, (\d+) already known, (\d+) rejected`)

// importSummaryOf runs the import to completion and returns its counts.
func runImport(t *testing.T, bin, cfg, file string) (lines, fresh, known, rejected int, out string) {
	t.Helper()
	cmd := exec.Command(bin, "import", file, "--source", "stripe", "--config", cfg, "--batch", "250")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("webhookd import: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	m := summaryRE.FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("no summary in the output:\n%s", stdout.String())
	}
	n := func(s string) int { v, _ := strconv.Atoi(s); return v }
	return n(m[1]), n(m[2]), n(m[3]), n(m[4]), stdout.String()
}

func TestImportRerunAndKilledHalfwayForwardEachEventOnce(t *testing.T) {
	t.Parallel()
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	rdb := redistest.New(t)
	dest := sink.New(nil)
	ds := httptest.NewServer(dest)
	t.Cleanup(ds.Close)
	// A running gateway (relay) and worker forward what the imports store,
	// concurrently with them.
	p := pipelinetest.Start(t, pipelinetest.Options{Schema: schema, Redis: rdb, Destinations: map[string]string{"sink": ds.URL}})
	cfg := proctest.WriteConfig(t, fmt.Sprintf(`
database_url: %q
redis_url: %q
queue: %q
sources:
  - name: stripe
    verify: {scheme: stripe, secrets: ["%s"]}
    destinations:
      - {name: sink, url: %q}
`, schema.URL, rdb.URL, rdb.Queue, pipelinetest.Secret, ds.URL))
	file, good := writeExport(t)
	count := func() int { return p.Schema.Int(t, `SELECT count(*) FROM events`) }

	// Killed halfway: the export is fed through a pipe, the process is
	// killed (SIGKILL) while it waits for more, with a batch half built.
	fifo := filepath.Join(t.TempDir(), "export.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "import", fifo, "--source", "stripe", "--config", cfg, "--batch", "250")
	var killedOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &killedOut, &killedOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(src)
	for i := 0; i < 5100 && sc.Scan(); i++ {
		if _, err := w.Write(append(sc.Bytes(), '\n')); err != nil {
			t.Fatal(err)
		}
	}
	src.Close()
	// 5100 lines hold 5099 good events: 20 batches of 250 commit, the
	// 99 left wait in memory when the process dies.
	pipelinetest.Eventually(t, 30*time.Second, "the first 20 batches", func() bool { return count() >= 5000 })
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	w.Close()
	if n := count(); n != 5000 {
		t.Fatalf("after the kill %d events are stored, want 5000 (the batch being built is lost)\n%s", n, killedOut.String())
	}

	// Rerun from the start: the rest is stored, nothing twice.
	lines, fresh, known, rejected, out := runImport(t, bin, cfg, file)
	if lines != importLines-1 || fresh != good-5000 || known != 5000 || rejected != 2 {
		t.Fatalf("rerun after the kill: %s", out)
	}
	for _, want := range []string{"line 1234: not valid JSON", "line 4321: event id"} {
		if !bytes.Contains([]byte(out), []byte(want)) {
			t.Errorf("summary does not name %q:\n%s", want, out)
		}
	}
	// Run again on the same file: nothing new.
	if _, fresh, known, _, out := runImport(t, bin, cfg, file); fresh != 0 || known != good {
		t.Fatalf("second full run: %s", out)
	}
	if n := count(); n != good {
		t.Fatalf("%d events stored, want %d", n, good)
	}

	// Everything reaches the destination exactly once, also after another
	// rerun once it was forwarded.
	pipelinetest.Eventually(t, 3*time.Minute, "every imported event forwarded", func() bool { return int(dest.Stats().Calls) >= good })
	if _, fresh, _, _, out := runImport(t, bin, cfg, file); fresh != 0 {
		t.Fatalf("run after forwarding: %s", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	time.Sleep(3 * time.Second) // the relay would have found anything new by now
	st := dest.Stats()
	if st.Calls != int64(good) || st.Keys != good || len(st.Repeated) != 0 {
		t.Fatalf("destination saw %d calls for %d keys (repeated %v), want %d each once", st.Calls, st.Keys, st.Repeated, good)
	}
	var pending int
	if err := p.Schema.Pool.QueryRow(ctx, `SELECT count(*) FROM event_outbox`).Scan(&pending); err != nil || pending != 0 {
		t.Errorf("%d events still pending (%v)", pending, err)
	}
}
