package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/tidwall/gjson"
	"golang.org/x/term"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway/eventid"
)

// importSummary counts what an import did.
type importSummary struct {
	Lines    int
	New      int
	Known    int
	Rejected []rejectedLine
	// OlderThanRetention counts the new events whose received_at is
	// older than retention: the next retention run deletes them.
	OlderThanRetention int
}

type rejectedLine struct {
	Line   int
	Reason string
}

// importer reads a JSON Lines export and stores each line as an event of
// one source, in batches.
type importer struct {
	store   *dedupe.Store
	source  string
	name    string // the file's base name, or "stdin"
	id      eventid.Extractor
	entity  *eventid.Extractor
	version *eventid.Extractor
	// eventType reads each event's type: the source's json: event_type
	// (or its scheme's); nil when it is in a header, which an export has
	// not (the events are stored with an unknown type).
	eventType   *eventid.Extractor
	contentType string
	maxBytes    int64
	batchSize   int
	// receivedAt is the gjson path of the provider's time of each event
	// (--received-at json:<path>); empty stores the import's time.
	receivedAt string
	opts       dedupe.ImportOptions
	// now and retention place received_at: not in the future, and
	// counted when older than retention.
	now       time.Time
	retention time.Duration
}

func importCommand() *cobra.Command {
	var (
		source, idSpec, contentType, receivedAt string
		batchSize                               int
		recordOnly                              bool
	)
	cmd := &cobra.Command{
		Use:   "import FILE.jsonl|- --source S",
		Short: "Backfill events from a provider's export (JSON Lines, a file or - for stdin), as if delivered; safe to rerun",
		Long: `Backfill events from a provider's export, one JSON event per line, as if each
had been delivered to SOURCE (signatures are not checked: the export is
trusted). FILE "-" reads stdin:

    stripe events list --limit 100 | jq -c '.data[]' | webhookd import - --source stripe

Each line is stored on its natural key (source, event id) only if it is not
stored yet, so the import can be rerun from the start after any failure:
known events are counted and left alone (never changed, whatever the
flags), and nothing is forwarded twice. New events wait for the relay of a
running gateway ("webhookd gateway" or "serve"), which hands them to the
queue like any event whose hand-off is pending.

--record-only stores the events as delivered elsewhere (by the system
webhookd replaces): a later delivery of the same id is a duplicate, but
nothing forwards them: no runs, no hand-off. They show as state
recorded_only in admin and "webhookd events"; "webhookd replay" forwards
one (or, by --state recorded_only, many) if needed.

--received-at json:<path> keeps the provider's time of each event as its
received_at (a number is Unix seconds, like Stripe's "created"; a string is
RFC 3339); a line without it, or with a time that does not parse or lies in
the future, is rejected. Retention counts from that time: an event older
than retention is deleted by the next retention run (the summary says how
many), and the admin listing places events at that time.

The event id is read with the source's event_id spec, or --id when the
source reads it from a header (which an export does not have). A progress
bar is drawn on stderr when it is a terminal. The exit status is 1 when any
line was rejected; stderr then names the first few.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, done, err := openCLI(cmd)
			if err != nil {
				return err
			}
			defer done()
			src, ok := a.cfg.Process.Sources.Gateway[source]
			if !ok {
				return fmt.Errorf("--source %q is not configured in %s", source, a.cfg.Path)
			}
			if idSpec == "" {
				idSpec = src.EventID.String()
			}
			if strings.HasPrefix(idSpec, "header:") {
				return fmt.Errorf("source %s reads its event id from a header (%s), which an export has not: give --id json:<path>", source, idSpec)
			}
			id, err := eventid.Parse(idSpec)
			if err != nil {
				return fmt.Errorf("--id: %w", err)
			}
			im := &importer{store: a.store, source: source, id: id, contentType: contentType,
				maxBytes: a.cfg.Process.MaxBodyBytes, batchSize: max(batchSize, 1),
				opts: dedupe.ImportOptions{RecordOnly: recordOnly}, now: time.Now(), retention: a.cfg.Process.Retention}
			if receivedAt != "" {
				path, ok := strings.CutPrefix(receivedAt, "json:")
				if !ok || path == "" || strings.TrimSpace(path) != path {
					return fmt.Errorf("--received-at %q: want json:<path>, e.g. json:created", receivedAt)
				}
				im.receivedAt = path
			}
			if t := src.EventType; t != nil && strings.HasPrefix(t.String(), "json:") {
				im.eventType = t
			}
			im.entity, im.version = src.OrderEntity, src.OrderVersion

			in, size := cmd.InOrStdin(), int64(-1)
			im.name = "stdin"
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return fmt.Errorf("error opening import file: %w", err)
				}
				defer f.Close()
				if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
					size = st.Size()
				}
				in, im.name = f, filepath.Base(args[0])
			}
			bar := newImportBar(cmd.ErrOrStderr(), size, im.name)
			sum, err := im.run(cmd, in, bar)
			if bar != nil {
				_ = bar.Finish()
			}
			printImportSummary(cmd.OutOrStdout(), im.name, source, recordOnly, sum)
			if err != nil {
				return err
			}
			return reportImportProblems(cmd.ErrOrStderr(), im.retention, sum)
		},
	}
	cmd.Flags().StringVarP(&source, "source", "s", "", "source the events belong to (required)")
	cmd.Flags().StringVar(&idSpec, "id", "", "event id spec for the lines (default: the source's event_id)")
	cmd.Flags().StringVar(&contentType, "content-type", "application/json", "Content-Type stored and forwarded with each event")
	cmd.Flags().IntVar(&batchSize, "batch", 500, "lines stored per statement")
	cmd.Flags().BoolVar(&recordOnly, "record-only", false, "record the events as delivered elsewhere: stored (a redelivery is a duplicate), never forwarded")
	cmd.Flags().StringVar(&receivedAt, "received-at", "", "json:<path> of each event's time (Unix seconds or RFC 3339), kept as received_at")
	_ = cmd.MarkFlagRequired("source")
	return cmd
}

// newImportBar returns a progress bar drawn on w when w is a terminal,
// else nil: a pipe or a file gets no bar bytes. size is the input's size
// in bytes, -1 when unknown (stdin, a pipe).
func newImportBar(w io.Writer, size int64, name string) *progressbar.ProgressBar {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return progressbar.NewOptions64(size,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("importing "+name),
		progressbar.OptionShowBytes(true),
		progressbar.OptionShowCount(),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
	)
}

// run reads r line by line, storing a batch whenever it fills, and moves
// bar (when not nil) along. Sum.Lines counts the lines that are not
// blank; a rejected line is named by its line number in the input. A batch is one statement: a crash loses at
// most the lines of the batch being built, and a rerun stores them.
func (im *importer) run(cmd *cobra.Command, r io.Reader, bar *progressbar.ProgressBar) (importSummary, error) {
	var (
		sum    importSummary
		batch  = make([]dedupe.ImportedEvent, 0, im.batchSize)
		br     = bufio.NewReaderSize(r, 1<<20)
		cutoff = im.now.Add(-im.retention)
	)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		inserted, err := im.store.ImportEvents(cmd.Context(), batch, im.opts)
		if err != nil {
			return err
		}
		for i, ok := range inserted {
			if !ok {
				sum.Known++
				continue
			}
			sum.New++
			if at := batch[i].ReceivedAt; !at.IsZero() && at.Before(cutoff) {
				sum.OlderThanRetention++
			}
		}
		batch = batch[:0]
		return nil
	}
	for n := 1; ; n++ { // n is the line number in the input, blank lines included
		line, readErr := br.ReadBytes('\n')
		if len(line) > 0 {
			if bar != nil {
				_ = bar.Add64(int64(len(line)))
			}
			sum.Lines++
			ev, reason := im.parse(bytes.TrimSpace(line), n)
			switch {
			case reason == "blank":
				sum.Lines--
			case reason != "":
				sum.Rejected = append(sum.Rejected, rejectedLine{Line: n, Reason: reason})
			default:
				batch = append(batch, ev)
				if len(batch) == im.batchSize {
					if err := flush(); err != nil {
						return sum, err
					}
				}
			}
		}
		if errors.Is(readErr, io.EOF) {
			break
		}
		if readErr != nil {
			return sum, fmt.Errorf("error reading import input: %w", readErr)
		}
	}
	return sum, flush()
}

// parse turns line n into an event, or names why it is rejected
// ("blank" for an empty line, which is skipped).
func (im *importer) parse(line []byte, n int) (dedupe.ImportedEvent, string) {
	if len(line) == 0 {
		return dedupe.ImportedEvent{}, "blank"
	}
	if int64(len(line)) > im.maxBytes {
		return dedupe.ImportedEvent{}, fmt.Sprintf("longer than max_body_bytes (%d)", im.maxBytes)
	}
	if !json.Valid(line) {
		return dedupe.ImportedEvent{}, "not valid JSON"
	}
	header := http.Header{"Content-Type": {im.contentType}}
	id, err := im.id.Extract(header, line)
	if err != nil {
		return dedupe.ImportedEvent{}, "event id: " + err.Error()
	}
	var at time.Time
	if im.receivedAt != "" {
		var reason string
		if at, reason = providerTime(line, im.receivedAt, im.now); reason != "" {
			return dedupe.ImportedEvent{}, "received-at json:" + im.receivedAt + ": " + reason
		}
	}
	header.Set("X-Webhookd-Import", im.name+":"+strconv.Itoa(n))
	hj, _ := json.Marshal(header)
	ev := dedupe.ImportedEvent{
		Event:      dedupe.Event{Source: im.source, ExternalID: id, ContentType: im.contentType, Headers: hj, Payload: bytes.Clone(line)},
		ReceivedAt: at,
	}
	if im.eventType != nil {
		if t, err := im.eventType.Extract(header, line); err == nil {
			ev.EventType = t
		} else if errors.Is(err, eventid.ErrInvalid) {
			return dedupe.ImportedEvent{}, "event type: " + err.Error()
		}
	}
	if im.entity != nil {
		e, errE := im.entity.Extract(header, line)
		v, errV := im.version.Extract(header, line)
		if errE == nil && errV == nil {
			ev.OrderEntity, ev.OrderVersion = e, v
		}
	}
	return ev, ""
}

// maxFuture is how far past now a provider's time may lie (clocks
// differ); later ones are refused: they would sort above every live event
// and outlive retention.
const maxFuture = 5 * time.Minute

// providerTime reads an event's time at the gjson path of line: a number
// is Unix seconds (Stripe's "created"), a string RFC 3339. It returns why
// not when the value is missing, does not parse, or lies in the future.
func providerTime(line []byte, path string, now time.Time) (time.Time, string) {
	r := gjson.GetBytes(line, path)
	latest := now.Add(maxFuture)
	switch {
	case !r.Exists():
		return time.Time{}, "missing"
	case r.Type == gjson.Number:
		if r.Num <= 0 || math.IsNaN(r.Num) {
			return time.Time{}, fmt.Sprintf("%s is not a positive number of Unix seconds", r.Raw)
		}
		if r.Num > float64(latest.Unix()) {
			return time.Time{}, fmt.Sprintf("%s lies in the future as Unix seconds (milliseconds?)", r.Raw)
		}
		sec, frac := math.Modf(r.Num)
		return time.Unix(int64(sec), int64(frac*1e9)).UTC(), ""
	case r.Type == gjson.String:
		t, err := time.Parse(time.RFC3339Nano, r.Str)
		if err != nil {
			return time.Time{}, fmt.Sprintf("%q is not an RFC 3339 time", truncate(r.Str, 64))
		}
		if t.After(latest) {
			return time.Time{}, fmt.Sprintf("%s lies in the future", r.Str)
		}
		return t, ""
	}
	return time.Time{}, "is neither a number (Unix seconds) nor an RFC 3339 string"
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// maxRejectedShown caps the rejected lines listed in the summary.
const maxRejectedShown = 100

// printImportSummary writes the summary of an import to w (stdout).
func printImportSummary(w io.Writer, name, source string, recordOnly bool, s importSummary) {
	how := ""
	if recordOnly {
		how = " (recorded only)"
	}
	fmt.Fprintf(w, "imported %s into source %s%s: %d lines, %d new, %d already known, %d rejected\n",
		name, source, how, s.Lines, s.New, s.Known, len(s.Rejected))
	for i, r := range s.Rejected {
		if i == maxRejectedShown {
			fmt.Fprintf(w, "  … and %d more rejected lines\n", len(s.Rejected)-maxRejectedShown)
			break
		}
		fmt.Fprintf(w, "  line %d: %s\n", r.Line, r.Reason)
	}
	switch {
	case s.New > 0 && recordOnly:
		fmt.Fprintln(w, "new events are recorded as delivered elsewhere (state recorded_only): nothing forwards them; webhookd replay does if needed")
	case s.New > 0:
		fmt.Fprintln(w, "new events are handed to the queue by the relay of a running gateway (webhookd gateway or serve)")
	}
}

// rejectedOnStderr is how many rejected lines the error summary names.
const rejectedOnStderr = 5

// reportImportProblems writes to w (stderr) what an operator must know
// about an import that finished: new events that retention is about to
// delete, and the rejected lines, in which case it returns an error, so
// the exit status says the import was not whole.
func reportImportProblems(w io.Writer, retention time.Duration, s importSummary) error {
	if s.OlderThanRetention > 0 {
		fmt.Fprintf(w, "webhookd import: %d new events have a received_at older than retention (%s): the next retention run deletes them, "+
			"and a delivery of one of them after that is a new event\n", s.OlderThanRetention, retention)
	}
	if len(s.Rejected) == 0 {
		return nil
	}
	fmt.Fprintf(w, "webhookd import: %d of %d lines rejected (%d new, %d already known); first rejected:\n",
		len(s.Rejected), s.Lines, s.New, s.Known)
	for _, r := range s.Rejected[:min(len(s.Rejected), rejectedOnStderr)] {
		fmt.Fprintf(w, "  line %d: %s\n", r.Line, r.Reason)
	}
	return fmt.Errorf("import incomplete: %d of %d lines rejected", len(s.Rejected), s.Lines)
}
