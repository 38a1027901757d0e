package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/webhookd/webhookd"
	"github.com/webhookd/webhookd/config"
	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway/eventid"
	"github.com/webhookd/webhookd/gateway/importer"
	"github.com/webhookd/webhookd/migrations"
)

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
			im := &importer.Importer{Store: a.store, Source: source, ID: id, ContentType: contentType,
				MaxBytes: a.cfg.Process.MaxBodyBytes, BatchSize: max(batchSize, 1),
				Options: dedupe.ImportOptions{RecordOnly: recordOnly}, Now: time.Now(), Retention: a.cfg.Process.Retention}
			if receivedAt != "" {
				path, ok := strings.CutPrefix(receivedAt, "json:")
				if !ok || path == "" || strings.TrimSpace(path) != path {
					return fmt.Errorf("--received-at %q: want json:<path>, e.g. json:created", receivedAt)
				}
				im.ReceivedAt = path
			}
			if t := src.EventType; t != nil && strings.HasPrefix(t.String(), "json:") {
				im.EventType = t
			}
			im.Entity, im.Version = src.OrderEntity, src.OrderVersion

			in, size := cmd.InOrStdin(), int64(-1)
			im.Name = "stdin"
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return fmt.Errorf("error opening import file: %w", err)
				}
				defer f.Close()
				if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
					size = st.Size()
				}
				in, im.Name = f, filepath.Base(args[0])
			}
			var progress func(int)
			bar := newImportBar(cmd.ErrOrStderr(), size, im.Name)
			if bar != nil {
				progress = func(n int) { _ = bar.Add(n) }
			}
			sum, err := im.Run(cmd.Context(), in, progress)
			if bar != nil {
				_ = bar.Finish()
			}
			sum.Print(cmd.OutOrStdout(), im.Name, source, recordOnly)
			if err != nil {
				return err
			}
			return sum.ReportProblems(cmd.ErrOrStderr(), im.Retention)
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

// cli is what a direct-database command (import) opens: the config and a
// small pool.
type cli struct {
	cfg   *config.Config
	store *dedupe.Store
}

// openCLI opens what a direct-database command needs: the database pool.
// Call the returned func when done. It does not migrate: a schema other than this
// binary's is an error that says to run webhookd migrate.
func openCLI(cmd *cobra.Command) (*cli, func(), error) {
	cfg, err := configFrom(cmd)
	if err != nil {
		return nil, nil, err
	}
	if err := migrations.Check(cmd.Context(), cfg.Process.DatabaseURL); err != nil {
		return nil, nil, err
	}
	pool, err := webhookd.OpenPool(cmd.Context(), cfg.Process.DatabaseURL, 4)
	if err != nil {
		return nil, nil, err
	}
	return &cli{cfg: cfg, store: dedupe.New(pool)}, pool.Close, nil
}
