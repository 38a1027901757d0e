package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway/eventid"
)

// importSummary counts what an import did.
type importSummary struct {
	Lines    int
	New      int
	Known    int
	Rejected []rejectedLine
}

type rejectedLine struct {
	Line   int
	Reason string
}

// importer reads a JSON Lines export and stores each line as an event of
// one source, in batches.
type importer struct {
	store       *dedupe.Store
	source      string
	file        string
	id          eventid.Extractor
	entity      *eventid.Extractor
	version     *eventid.Extractor
	contentType string
	maxBytes    int64
	batchSize   int
}

func importCommand() *cobra.Command {
	var (
		source, idSpec, contentType string
		batchSize                   int
	)
	cmd := &cobra.Command{
		Use:   "import FILE.jsonl --source S",
		Short: "Backfill events from a provider's export (JSON Lines), as if delivered; safe to rerun",
		Long: `Backfill events from a provider's export, one JSON event per line, as if each
had been delivered to SOURCE (signatures are not checked: the file is
trusted). Each line is stored on its natural key (source, event id) only if
it is not stored yet, so the import can be rerun from the start after any
failure: known events are counted and left alone, and nothing is forwarded
twice. New events wait for the relay of a running gateway ("webhookd
gateway" or "serve"), which hands them to the queue like any event whose
hand-off is pending.

The event id is read with the source's event_id spec, or --id when the
source reads it from a header (which an export does not have).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, done, err := openCLI(cmd, false)
			if err != nil {
				return err
			}
			defer done()
			var src *sourceConf
			for i := range a.cfg.Sources {
				if a.cfg.Sources[i].Name == source {
					src = &a.cfg.Sources[i]
				}
			}
			if src == nil {
				return fmt.Errorf("--source %q is not configured in %s", source, a.cfg.path)
			}
			if idSpec == "" {
				idSpec = src.eventIDSpec()
			}
			if strings.HasPrefix(idSpec, "header:") {
				return fmt.Errorf("source %s reads its event id from a header (%s), which an export has not: give --id json:<path>", source, idSpec)
			}
			id, err := eventid.Parse(idSpec)
			if err != nil {
				return fmt.Errorf("--id: %w", err)
			}
			im := &importer{store: a.store, source: source, file: args[0], id: id, contentType: contentType,
				maxBytes: a.cfg.MaxBodyBytes, batchSize: max(batchSize, 1)}
			if src.Order != nil {
				e, errE := eventid.Parse(src.Order.Entity)
				v, errV := eventid.Parse(src.Order.Version)
				if errE == nil && errV == nil {
					im.entity, im.version = &e, &v
				}
			}
			f, err := os.Open(args[0])
			if err != nil {
				return fmt.Errorf("error opening import file: %w", err)
			}
			defer f.Close()
			size := int64(-1)
			if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
				size = st.Size()
			}
			bar := progressbar.NewOptions64(size,
				progressbar.OptionSetWriter(cmd.ErrOrStderr()),
				progressbar.OptionSetDescription("importing "+filepath.Base(args[0])),
				progressbar.OptionShowBytes(true),
				progressbar.OptionShowCount(),
				progressbar.OptionThrottle(100*time.Millisecond),
				progressbar.OptionOnCompletion(func() { fmt.Fprintln(cmd.ErrOrStderr()) }),
			)
			sum, err := im.run(cmd, f, bar)
			_ = bar.Finish()
			printImportSummary(cmd.OutOrStdout(), args[0], source, sum)
			return err
		},
	}
	cmd.Flags().StringVarP(&source, "source", "s", "", "source the events belong to (required)")
	cmd.Flags().StringVar(&idSpec, "id", "", "event id spec for the lines (default: the source's event_id)")
	cmd.Flags().StringVar(&contentType, "content-type", "application/json", "Content-Type stored and forwarded with each event")
	cmd.Flags().IntVar(&batchSize, "batch", 500, "lines stored per statement")
	_ = cmd.MarkFlagRequired("source")
	return cmd
}

// run reads r line by line, storing a batch whenever it fills. A batch is
// one statement: a crash loses at most the lines of the batch being
// built, and a rerun stores them.
func (im *importer) run(cmd *cobra.Command, r io.Reader, bar *progressbar.ProgressBar) (importSummary, error) {
	var (
		sum   importSummary
		batch = make([]dedupe.Event, 0, im.batchSize)
		br    = bufio.NewReaderSize(r, 1<<20)
		base  = filepath.Base(im.file)
	)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		inserted, err := im.store.ImportEvents(cmd.Context(), batch)
		if err != nil {
			return err
		}
		for _, ok := range inserted {
			if ok {
				sum.New++
			} else {
				sum.Known++
			}
		}
		batch = batch[:0]
		return nil
	}
	for {
		line, readErr := br.ReadBytes('\n')
		if len(line) > 0 {
			_ = bar.Add64(int64(len(line)))
			sum.Lines++
			ev, reason := im.parse(bytes.TrimSpace(line), base, sum.Lines)
			switch {
			case reason == "blank":
				sum.Lines--
			case reason != "":
				sum.Rejected = append(sum.Rejected, rejectedLine{Line: sum.Lines, Reason: reason})
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
			return sum, fmt.Errorf("error reading import file: %w", readErr)
		}
	}
	return sum, flush()
}

// parse turns one line into an event, or names why it is rejected
// ("blank" for an empty line, which is skipped).
func (im *importer) parse(line []byte, file string, n int) (dedupe.Event, string) {
	if len(line) == 0 {
		return dedupe.Event{}, "blank"
	}
	if int64(len(line)) > im.maxBytes {
		return dedupe.Event{}, fmt.Sprintf("longer than max_body_bytes (%d)", im.maxBytes)
	}
	if !json.Valid(line) {
		return dedupe.Event{}, "not valid JSON"
	}
	header := http.Header{"Content-Type": {im.contentType}}
	id, err := im.id.Extract(header, line)
	if err != nil {
		return dedupe.Event{}, "event id: " + err.Error()
	}
	header.Set("X-Webhookd-Import", file+":"+strconv.Itoa(n))
	hj, _ := json.Marshal(header)
	ev := dedupe.Event{Source: im.source, ExternalID: id, ContentType: im.contentType, Headers: hj, Payload: bytes.Clone(line)}
	if im.entity != nil {
		e, errE := im.entity.Extract(header, line)
		v, errV := im.version.Extract(header, line)
		if errE == nil && errV == nil {
			ev.OrderEntity, ev.OrderVersion = e, v
		}
	}
	return ev, ""
}

// maxRejectedShown caps the rejected lines listed in the summary.
const maxRejectedShown = 100

func printImportSummary(w io.Writer, file, source string, s importSummary) {
	fmt.Fprintf(w, "imported %s into source %s: %d lines, %d new, %d already known, %d rejected\n",
		file, source, s.Lines, s.New, s.Known, len(s.Rejected))
	for i, r := range s.Rejected {
		if i == maxRejectedShown {
			fmt.Fprintf(w, "  … and %d more rejected lines\n", len(s.Rejected)-maxRejectedShown)
			break
		}
		fmt.Fprintf(w, "  line %d: %s\n", r.Line, r.Reason)
	}
	if s.New > 0 {
		fmt.Fprintln(w, "new events are handed to the queue by the relay of a running gateway (webhookd gateway or serve)")
	}
}
