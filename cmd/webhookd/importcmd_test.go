package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/sink"
	"github.com/webhookd/webhookd/internal/testkit/pgtest"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/internal/testkit/proctest"
	"github.com/webhookd/webhookd/internal/testkit/redistest"
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

// importRun is what one webhookd import run did.
type importRun struct {
	code                          int
	stdout, stderr                string
	lines, fresh, known, rejected int
}

// importWith runs webhookd import with args (FILE or "-" first) and
// stdin, to completion, and returns its exit status, output and counts.
func importWith(t *testing.T, bin, cfg string, stdin []byte, args ...string) importRun {
	t.Helper()
	cmd := exec.Command(bin, append(append([]string{"import"}, args...), "--source", "stripe", "--config", cfg, "--batch", "250")...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	r := importRun{}
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("webhookd import: %v", err)
		}
		r.code = exit.ExitCode()
	}
	r.stdout, r.stderr = stdout.String(), stderr.String()
	m := summaryRE.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no summary in the output (exit %d):\n%s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	n := func(s string) int { v, _ := strconv.Atoi(s); return v }
	r.lines, r.fresh, r.known, r.rejected = n(m[1]), n(m[2]), n(m[3]), n(m[4])
	// The exit status says whether every line was taken.
	if (r.code != 0) != (r.rejected > 0) {
		t.Fatalf("exit status %d with %d rejected lines\nstdout: %s\nstderr: %s", r.code, r.rejected, r.stdout, r.stderr)
	}
	return r
}

// runImport imports file to completion and returns its counts.
func runImport(t *testing.T, bin, cfg, file string) (lines, fresh, known, rejected int, out string) {
	t.Helper()
	r := importWith(t, bin, cfg, nil, file)
	return r.lines, r.fresh, r.known, r.rejected, r.stdout
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

// importConfig writes a config for webhookd import into schema, whose
// stripe source forwards to destURL.
func importConfig(t *testing.T, schema *pgtest.Schema, rdb *redistest.DB, destURL string) string {
	t.Helper()
	return proctest.WriteConfig(t, fmt.Sprintf(`
database_url: %q
redis_url: %q
queue: %q
sources:
  - name: stripe
    verify: {scheme: stripe, secrets: ["%s"]}
    destinations:
      - {name: sink, url: %q}
`, schema.URL, rdb.URL, rdb.Queue, pipelinetest.Secret, destURL))
}

// lines joins JSON lines into an export.
func lines(ls ...string) []byte {
	var b bytes.Buffer
	for _, l := range ls {
		b.WriteString(l + "\n")
	}
	return b.Bytes()
}

// TestImportStdinExitStatusAndNoProgressInAPipe: "-" reads stdin; any
// rejected line makes the exit status 1, with the counts and the first
// five rejected lines on stderr while stdout keeps the whole summary; a
// pipe gets no progress bar bytes; an import with nothing rejected exits
// 0 with nothing on stderr.
func TestImportStdinExitStatusAndNoProgressInAPipe(t *testing.T) {
	t.Parallel()
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	cfg := importConfig(t, schema, redistest.New(t), "http://127.0.0.1:9/unused")

	export := lines(
		`{"id":"evt_s1","type":"invoice.paid"}`,
		`{not json`,
		`{"id":"evt_s2","type":"invoice.paid"}`,
		`{"type":"no id"}`,
		``,
		`[1,`, `nope`, `{"id":""}`, `{"id":{}}`, `"str"`,
		`{"id":"evt_s3","type":"invoice.paid"}`,
	)
	r := importWith(t, bin, cfg, export, "-")
	if r.code != 1 || r.lines != 10 || r.fresh != 3 || r.rejected != 7 {
		t.Fatalf("stdin import: exit %d, %d lines, %d new, %d rejected; want 1, 10, 3, 7\nstdout: %s\nstderr: %s", r.code, r.lines, r.fresh, r.rejected, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "imported stdin into source stripe") || !strings.Contains(r.stdout, "line 10: event id") {
		t.Errorf("stdout summary:\n%s", r.stdout)
	}
	for _, want := range []string{"7 of 10 lines rejected (3 new, 0 already known)", "  line 2: not valid JSON\n", "  line 4: event id",
		"import incomplete: 7 of 10 lines rejected"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not hold %q:\n%s", want, r.stderr)
		}
	}
	// Line 5 is blank: the rejected lines are 2, 4, 6, 7, 8, 9 and 10.
	if !strings.Contains(r.stderr, "  line 8: event id") || strings.Contains(r.stderr, "line 9:") || strings.Contains(r.stderr, "line 10:") {
		t.Errorf("stderr lists more than the first five rejected lines:\n%s", r.stderr)
	}
	if strings.ContainsAny(r.stderr, "\r\x1b") || strings.Contains(r.stderr, "importing") {
		t.Errorf("progress bar drawn into a pipe: %q", r.stderr)
	}
	if got := schema.Int(t, `SELECT count(*) FROM events WHERE headers->'X-Webhookd-Import'->>0 LIKE 'stdin:%'`); got != 3 {
		t.Errorf("%d events stored from stdin, want 3", got)
	}

	// Nothing rejected: exit 0, stderr empty; rerun: all known.
	good := lines(`{"id":"evt_s1","type":"invoice.paid"}`, `{"id":"evt_s4","type":"invoice.paid"}`)
	r = importWith(t, bin, cfg, good, "-")
	if r.code != 0 || r.fresh != 1 || r.known != 1 || r.stderr != "" {
		t.Fatalf("clean stdin import: exit %d, %d new, %d known, stderr %q", r.code, r.fresh, r.known, r.stderr)
	}
	if n := schema.Int(t, `SELECT count(*) FROM events`); n != 4 {
		t.Errorf("%d events stored, want 4", n)
	}
}

// TestImportRecordOnlyIsNeverForwarded: events imported with
// --record-only are stored with no outbox row and no run, and stay so
// through the running relay, reconciler and worker (which forward a plain
// import alongside); a later live delivery of one is a 200 duplicate that
// calls no destination; the event reads as recorded_only.
func TestImportRecordOnlyIsNeverForwarded(t *testing.T) {
	t.Parallel()
	bin := proctest.Binary(t)
	dest := sink.New(nil)
	ds := httptest.NewServer(dest)
	t.Cleanup(ds.Close)
	p := pipelinetest.Start(t, pipelinetest.Options{Destinations: map[string]string{"sink": ds.URL}, RecoveryMinAge: 100 * time.Millisecond,
		AdminTokens: []string{cliToken}})
	cfg := importConfig(t, p.Schema, p.Redis, ds.URL)

	recorded := lines(`{"id":"evt_ro_1","type":"invoice.paid"}`, `{"id":"evt_ro_2","type":"invoice.paid"}`, `{"id":"evt_ro_3","type":"invoice.paid"}`)
	r := importWith(t, bin, cfg, recorded, "-", "--record-only")
	if r.code != 0 || r.fresh != 3 || !strings.Contains(r.stdout, "(recorded only)") || !strings.Contains(r.stdout, "nothing forwards them") {
		t.Fatalf("record-only import: exit %d, %d new\n%s%s", r.code, r.fresh, r.stdout, r.stderr)
	}
	// A plain import beside it is forwarded: recovery is running.
	if r := importWith(t, bin, cfg, lines(`{"id":"evt_fwd_1","type":"invoice.paid"}`), "-"); r.code != 0 || r.fresh != 1 {
		t.Fatalf("plain import: %+v", r)
	}
	pipelinetest.Eventually(t, 30*time.Second, "the plain import forwarded", func() bool { return dest.Count("stripe:sink:evt_fwd_1") == 1 })
	untouched := func() bool {
		return p.Schema.Int(t, `SELECT count(*) FROM event_outbox WHERE external_id LIKE 'evt_ro_%'`) == 0 &&
			p.Schema.Int(t, `SELECT count(*) FROM job_runs WHERE external_id LIKE 'evt_ro_%'`) == 0 &&
			dest.Stats().Calls == 1
	}
	// Several reconciler passes (every 200 ms; events older than 100 ms).
	stays(t, 2*time.Second, "recorded-only events unforwarded", untouched)

	// The provider delivers one of them live: a duplicate, nothing called.
	code, body := p.Send(t, []byte(`{"id":"evt_ro_2","type":"invoice.paid"}`))
	if code != http.StatusOK || !strings.Contains(string(body), "duplicate") || !strings.Contains(string(body), dedupe.StateRecordedOnly) {
		t.Fatalf("live delivery of a recorded-only event: %d %s, want a 200 duplicate in state recorded_only", code, body)
	}
	stays(t, 1500*time.Millisecond, "recorded-only events unforwarded after a live delivery", untouched)
	d, err := p.Store.GetEvent(t.Context(), "stripe", "evt_ro_2", dedupe.DestinationView{})
	if err != nil || d.State != dedupe.StateRecordedOnly || d.Deliveries != 2 || len(d.Runs) != 0 {
		t.Fatalf("event after the live delivery: state %q, %d deliveries, runs %v (%v)", d.State, d.Deliveries, d.Runs, err)
	}
	out, err := operatorCommand(bin, p.URL, cliToken, "events", "show", "stripe", "evt_ro_2").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "state       recorded_only") || !strings.Contains(string(out), "imported as delivered elsewhere") {
		t.Errorf("webhookd events show: %v\n%s", err, out)
	}
	// Rerun: all known, still recorded only.
	if r := importWith(t, bin, cfg, recorded, "-", "--record-only"); r.code != 0 || r.fresh != 0 || r.known != 3 {
		t.Fatalf("record-only rerun: %+v", r)
	}
	if !untouched() {
		t.Fatal("a rerun forwarded a recorded-only event")
	}
}

// stays fails the test when cond stops holding within d.
func stays(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if !cond() {
			t.Fatalf("%s: changed", what)
		}
	}
}

// TestImportReceivedAt: --received-at json:<path> keeps the provider's
// time from a number (Unix seconds) or an RFC 3339 string, as received_at
// and last_received_at; a line where it is missing, does not parse or
// lies in the future is rejected, never given the import's time; events
// older than retention are counted on stderr; a rerun changes nothing.
func TestImportReceivedAt(t *testing.T) {
	t.Parallel()
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	cfg := importConfig(t, schema, redistest.New(t), "http://127.0.0.1:9/unused")
	recent := time.Now().Add(-time.Hour).Truncate(time.Second).UTC()

	numbers := lines(
		`{"id":"evt_n1","created":1700000000,"type":"charge.refunded"}`,
		`{"id":"evt_n2","created":1700000000.25}`,
		fmt.Sprintf(`{"id":"evt_n3","created":%d}`, recent.Unix()),
		`{"id":"evt_n4"}`,
		`{"id":"evt_n5","created":"yesterday"}`,
		`{"id":"evt_n6","created":1700000000000}`,
		`{"id":"evt_n7","created":null}`,
		`{"id":"evt_n8","created":-5}`,
	)
	r := importWith(t, bin, cfg, numbers, "-", "--received-at", "json:created")
	if r.code != 1 || r.fresh != 3 || r.rejected != 5 {
		t.Fatalf("numbers: exit %d, %d new, %d rejected\n%s%s", r.code, r.fresh, r.rejected, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"line 4: received-at json:created: missing",
		`line 5: received-at json:created: "yesterday" is not an RFC 3339 time`,
		"line 6: received-at json:created: 1700000000000 lies in the future as Unix seconds (milliseconds?)",
		"line 7: received-at json:created: is neither",
		"line 8: received-at json:created: -5 is not a positive number",
		"2 new events have a received_at older than retention (720h0m0s)",
	} {
		if !strings.Contains(r.stdout+r.stderr, want) {
			t.Errorf("output does not hold %q:\n%s%s", want, r.stdout, r.stderr)
		}
	}

	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	stringsExport := lines(
		`{"id":"evt_s1","meta":{"at":"2023-11-14T22:13:20Z"}}`,
		`{"id":"evt_s2","meta":{"at":"2023-11-15T00:13:20.5+02:00"}}`,
		`{"id":"evt_s3","meta":{"at":"2023-11-14 22:13:20"}}`,
		`{"id":"evt_s4","meta":{"at":"`+future+`"}}`,
		`{"id":"evt_s5","meta":{}}`,
	)
	r = importWith(t, bin, cfg, stringsExport, "-", "--received-at", "json:meta.at")
	if r.code != 1 || r.fresh != 2 || r.rejected != 3 || !strings.Contains(r.stdout, "lies in the future") {
		t.Fatalf("strings: exit %d, %d new, %d rejected\n%s%s", r.code, r.fresh, r.rejected, r.stdout, r.stderr)
	}

	at := func(id string) (time.Time, time.Time) {
		t.Helper()
		var first, last time.Time
		if err := schema.Pool.QueryRow(t.Context(), `SELECT received_at, last_received_at FROM events WHERE external_id = $1`, id).Scan(&first, &last); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		return first, last
	}
	for id, want := range map[string]time.Time{
		"evt_n1": time.Unix(1700000000, 0),
		"evt_n2": time.Unix(1700000000, 250e6),
		"evt_n3": recent,
		"evt_s1": time.Unix(1700000000, 0),
		"evt_s2": time.Unix(1700000000, 500e6),
	} {
		if first, last := at(id); !first.Equal(want) || !last.Equal(want) {
			t.Errorf("%s: received_at %s, last_received_at %s; want %s", id, first, last, want.UTC())
		}
	}
	if n := schema.Int(t, `SELECT count(*) FROM events`); n != 5 {
		t.Errorf("%d events stored, want 5 (no rejected line given the import's time)", n)
	}
	// The event type is read as at ingest (stripe: json:type), unknown when absent.
	if n := schema.Int(t, `SELECT count(*) FROM events WHERE external_id = 'evt_n1' AND event_type = 'charge.refunded'`); n != 1 {
		t.Error("evt_n1 was not stored with its type charge.refunded")
	}
	if n := schema.Int(t, `SELECT count(*) FROM events WHERE event_type IS NOT NULL`); n != 1 {
		t.Errorf("%d events stored with a type, want 1", n)
	}

	// Rerun: nothing new, nothing moved.
	if r := importWith(t, bin, cfg, numbers, "-", "--received-at", "json:created"); r.fresh != 0 || r.known != 3 {
		t.Fatalf("rerun: %+v", r)
	}
	if first, _ := at("evt_n1"); !first.Equal(time.Unix(1700000000, 0)) {
		t.Errorf("rerun moved evt_n1 to %s", first)
	}
}

// TestImportDrawsProgressOnATerminal: with stderr a terminal (a pty),
// the import draws its progress bar there; stdout, a pipe, gets only the
// summary.
func TestImportDrawsProgressOnATerminal(t *testing.T) {
	t.Parallel()
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	cfg := importConfig(t, schema, redistest.New(t), "http://127.0.0.1:9/unused")
	file := filepath.Join(t.TempDir(), "export.jsonl")
	if err := os.WriteFile(file, lines(`{"id":"evt_tty_1"}`, `{"id":"evt_tty_2"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	cmd := exec.Command(bin, "import", file, "--source", "stripe", "--config", cfg)
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, tty
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	var terminal bytes.Buffer
	read := make(chan struct{})
	go func() { _, _ = io.Copy(&terminal, ptmx); close(read) }() // ends with EIO once the process exits
	if err := cmd.Wait(); err != nil {
		t.Fatalf("import: %v\n%s", err, terminal.String())
	}
	select {
	case <-read:
	case <-time.After(5 * time.Second):
		t.Fatal("the terminal did not close")
	}
	if !strings.Contains(terminal.String(), "importing export.jsonl") || !strings.Contains(terminal.String(), "100%") {
		t.Errorf("no progress bar on the terminal: %q", terminal.String())
	}
	if strings.Contains(stdout.String(), "importing") || !strings.Contains(stdout.String(), "2 new") {
		t.Errorf("stdout: %q", stdout.String())
	}
}
