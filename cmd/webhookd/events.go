package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/webhookd/webhookd"
	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway"
	"github.com/webhookd/webhookd/gateway/admin"
	"github.com/webhookd/webhookd/jobs"
	"github.com/webhookd/webhookd/migrations"
)

// cli is what an operator command opens: the config, a small pool, and,
// for commands that enqueue, Redis and the queue.
type cli struct {
	cfg      *config
	log      *slog.Logger
	store    *dedupe.Store
	enqueuer *jobs.Enqueuer
}

// openCLI opens what an operator command needs: the database pool, and
// with queue, Redis and the enqueuer. Log lines (the replay audit lines)
// go to stderr so stdout stays the command's answer. Call the returned
// func when done. It does not migrate: a schema other than this binary's
// is an error that says to run webhookd migrate.
func openCLI(cmd *cobra.Command, queue bool) (*cli, func(), error) {
	cfg, err := configFrom(cmd)
	if err != nil {
		return nil, nil, err
	}
	log := slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	if queue {
		log = slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil))
	}
	if err := migrations.Check(cmd.Context(), cfg.DatabaseURL); err != nil {
		return nil, nil, err
	}
	pool, err := webhookd.OpenPool(cmd.Context(), cfg.DatabaseURL, 4)
	if err != nil {
		return nil, nil, err
	}
	a := &cli{cfg: cfg, log: log, store: dedupe.New(pool)}
	closers := []func(){pool.Close}
	if queue {
		rdb, err := webhookd.OpenRedis(cfg.redis())
		if err != nil {
			pool.Close()
			return nil, nil, err
		}
		a.enqueuer = jobs.NewShardedEnqueuer(rdb, jobs.Shards{Queue: cfg.Queue, N: cfg.QueueShards}, cfg.routes())
		closers = append(closers, func() { _ = rdb.Close() })
	}
	return a, func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}, nil
}

func eventsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "events",
		Short: "List and show recorded events",
	}
	cmd.AddCommand(eventsListCommand(), eventsShowCommand())
	return cmd
}

func eventsListCommand() *cobra.Command {
	var (
		source, state, since, until, cursor string
		limit                               int
		asJSON                              bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List events, newest first (filters: --source, --state, --since, --until)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, done, err := openCLI(cmd, false)
			if err != nil {
				return err
			}
			defer done()
			f, err := cliFilter(a, source, state, since, until)
			if err != nil {
				return err
			}
			f.Cursor, f.Limit = cursor, limit
			page, err := a.store.ListEvents(cmd.Context(), f)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				for _, e := range page.Events {
					b, err := admin.EventJSON(e)
					if err != nil {
						return err
					}
					fmt.Fprintf(out, "%s\n", b)
				}
				return nil
			}
			tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "RECEIVED (UTC)\tSOURCE\tEVENT ID\tSTATE\tDELIVERIES\tRUNS")
			for _, e := range page.Events {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", e.ReceivedAt.UTC().Format(time.DateTime), e.Source,
					e.ExternalID, e.State, e.Deliveries, strings.Join(e.RunStatuses, ","))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if page.Next != "" {
				fmt.Fprintf(out, "more: add --cursor %s\n", page.Next)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&source, "source", "", "only this source")
	fl.StringVar(&state, "state", "", "only this state: "+strings.Join(admin.States, ", "))
	fl.StringVar(&since, "since", "", "received at or after: RFC 3339 time or a duration ago (24h)")
	fl.StringVar(&until, "until", "", "received before: RFC 3339 time or a duration ago")
	fl.StringVar(&cursor, "cursor", "", "continue after a previous page")
	fl.IntVar(&limit, "limit", 50, "events per page (at most 1000)")
	fl.BoolVar(&asJSON, "json", false, "one JSON object per line")
	return cmd
}

// cliFilter builds an event filter from flags.
func cliFilter(a *cli, source, state, since, until string) (dedupe.EventFilter, error) {
	now := time.Now()
	f := dedupe.EventFilter{Source: source, State: state, Destinations: a.cfg.routes().DestinationCounts(), Filters: a.cfg.routes().DestinationFilters()}
	if state != "" && !strings.Contains(","+strings.Join(admin.States, ",")+",", ","+state+",") {
		return f, fmt.Errorf("--state %q: want one of %s", state, strings.Join(admin.States, ", "))
	}
	var err error
	if f.Since, err = admin.ParseTime(since, now); err != nil {
		return f, fmt.Errorf("--since: %w", err)
	}
	if f.Until, err = admin.ParseTime(until, now); err != nil {
		return f, fmt.Errorf("--until: %w", err)
	}
	return f, nil
}

func eventsShowCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show SOURCE EVENT_ID",
		Short: "Show one event: payload, headers, runs and the attempt log",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, done, err := openCLI(cmd, false)
			if err != nil {
				return err
			}
			defer done()
			dests := 0
			for _, s := range a.cfg.Sources {
				if s.Name == args[0] {
					dests = len(s.Destinations)
				}
			}
			d, err := a.store.GetEvent(cmd.Context(), args[0], args[1], dests, a.cfg.routes().DestinationFilters()...)
			if err != nil {
				return err
			}
			if asJSON {
				b, err := admin.EventDetailJSON(d)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", b)
				return err
			}
			return printEvent(cmd.OutOrStdout(), d)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the event as the admin API answers it")
	return cmd
}

// handedOff says whether an event's tasks are in the queue.
func handedOff(e dedupe.EventSummary) string {
	switch {
	case e.RecordedOnly:
		return "no: imported as delivered elsewhere (--record-only); only a replay forwards it"
	case e.HandedOff:
		return "yes"
	}
	return "pending (the relay will enqueue it)"
}

func printEvent(w io.Writer, d dedupe.EventDetail) error {
	ts := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.UTC().Format(time.DateTime)
	}
	evType := d.EventType
	if evType == "" {
		evType = "(unknown)"
	}
	fmt.Fprintf(w, "event       %s / %s\ntype        %s\nstate       %s\nreceived    %s (last %s)\ndeliveries  %d\nhanded off  %s\ncontent     %s, %d bytes\n",
		d.Source, d.ExternalID, evType, d.State, ts(&d.ReceivedAt), ts(&d.LastReceivedAt), d.Deliveries, handedOff(d.EventSummary),
		d.ContentType, d.PayloadBytes)
	fmt.Fprintln(w, "\nruns:")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  KEY\tGEN\tSTATUS\tATTEMPTS\tCALLS\tREPLAYED BY\tRESULT / LAST ERROR")
	for _, r := range d.Runs {
		note := r.LastError
		if r.Result != nil {
			note = string(r.Result)
		}
		by := r.ReplayedBy
		if r.ReplayReason != "" {
			by += " (" + r.ReplayReason + ")"
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%d/%d\t%d\t%s\t%s\n", r.Key, r.Generation, r.Status, r.Attempts, r.MaxAttempts, r.Calls, by, note)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\nattempts:")
	for _, at := range d.Attempts {
		fmt.Fprintf(w, "  %s  %s  call %d  HTTP %d  %s  %s\n", at.CreatedAt.UTC().Format(time.DateTime), at.Key, at.Call, at.StatusCode, at.Duration, at.Summary())
		if at.RetryAt != nil {
			fmt.Fprintf(w, "      next try  %s\n", ts(at.RetryAt))
		}
		if at.Answer.Headers != nil {
			fmt.Fprintf(w, "      headers   %s\n", at.Answer.Headers)
		}
		if len(at.Answer.Body) > 0 {
			body := string(at.Answer.Body)
			if !utf8.Valid(at.Answer.Body) {
				body = fmt.Sprintf("(binary, %d bytes)", len(at.Answer.Body))
			}
			if at.Answer.Truncated {
				body += " … (cut at 4 KiB)"
			}
			fmt.Fprintf(w, "      body      %s\n", body)
		}
	}
	fmt.Fprintln(w, "\nheaders:")
	fmt.Fprintln(w, indentOr(gateway.MaskHeaders(d.Headers)))
	fmt.Fprintln(w, "\npayload:")
	if !utf8.Valid(d.Payload) {
		fmt.Fprintf(w, "(binary, %d bytes)\n", len(d.Payload))
		return nil
	}
	_, err := fmt.Fprintln(w, indentOr(d.Payload))
	return err
}

func indentOr(b []byte) string {
	var v any
	if json.Unmarshal(b, &v) == nil {
		if out, err := json.MarshalIndent(v, "", "  "); err == nil {
			return string(out)
		}
	}
	return string(b)
}

// cliUser is the default "by" of a replay from the command line.
func cliUser() string {
	if u := os.Getenv("USER"); u != "" {
		return u + " (cli)"
	}
	return "cli"
}
