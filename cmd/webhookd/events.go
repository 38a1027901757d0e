package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/webhookd/webhookd"
	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway/admin"
	"github.com/webhookd/webhookd/internal/termsafe"
	"github.com/webhookd/webhookd/migrations"
)

// cli is what a direct-database command (import) opens: the config and a
// small pool.
type cli struct {
	cfg   *config
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
	if err := migrations.Check(cmd.Context(), cfg.DatabaseURL); err != nil {
		return nil, nil, err
	}
	pool, err := webhookd.OpenPool(cmd.Context(), cfg.DatabaseURL, 4)
	if err != nil {
		return nil, nil, err
	}
	return &cli{cfg: cfg, store: dedupe.New(pool)}, pool.Close, nil
}

func eventsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "events",
		Short: "List, search and show recorded events (through a running webhookd's admin API)",
	}
	addServerFlag(cmd)
	cmd.AddCommand(eventsListCommand(), eventsShowCommand())
	return cmd
}

// eventFilterFlags are the filters of events list and bulk replay, as the
// admin API names them.
type eventFilterFlags struct {
	source, state, since, until, q, eventType, destination, status string
}

func (f *eventFilterFlags) add(cmd *cobra.Command, prefix string) {
	fl := cmd.Flags()
	fl.StringVar(&f.source, "source", "", prefix+"only this source")
	fl.StringVar(&f.state, "state", "", prefix+"only this state: "+strings.Join(admin.States, ", "))
	fl.StringVar(&f.since, "since", "", prefix+"received at or after: RFC 3339 time or a duration ago (24h)")
	fl.StringVar(&f.until, "until", "", prefix+"received before: RFC 3339 time or a duration ago")
	fl.StringVar(&f.q, "q", "", prefix+"event id, exact or a prefix (case-sensitive)")
	fl.StringVar(&f.eventType, "type", "", prefix+"event type, a glob over the whole type (charge.*, orders/*)")
	fl.StringVar(&f.destination, "destination", "", prefix+"only events with this destination (its name, in any source)")
	fl.StringVar(&f.status, "status", "", prefix+"only events with a run in this status: running, done, failed, dead, skipped_stale")
}

// names are the flags of the filter, for refusing them where they do not
// apply.
func (f *eventFilterFlags) names() []string {
	return []string{"source", "state", "since", "until", "q", "type", "status"}
}

func (f *eventFilterFlags) query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"source": f.source, "state": f.state, "since": f.since, "until": f.until,
		"q": f.q, "type": f.eventType, "destination": f.destination, "status": f.status} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

func eventsListCommand() *cobra.Command {
	var (
		filter eventFilterFlags
		cursor string
		limit  int
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List events, newest first, with a count (filters: --q, --type, --source, --destination, --state, --status, --since, --until)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newAdminClient(cmd)
			if err != nil {
				return err
			}
			q := filter.query()
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			q.Set("limit", strconv.Itoa(limit))
			var page admin.EventListJSON
			raw, err := c.get(cmd.Context(), "/admin/events", q, &page)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, raw)
			}
			return printEventList(out, page)
		},
	}
	filter.add(cmd, "")
	fl := cmd.Flags()
	fl.StringVar(&cursor, "cursor", "", "continue from a previous page (the cursor it printed)")
	fl.IntVar(&limit, "limit", 50, "events per page (at most 1000)")
	fl.BoolVar(&asJSON, "json", false, "print the admin API's answer (JSON)")
	return cmd
}

// printEventList prints a page of events as a table, with the count and
// the cursors to the pages around it.
func printEventList(w io.Writer, page admin.EventListJSON) error {
	w = termsafe.NewWriter(w) // ids and types come from senders
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RECEIVED (UTC)\tSOURCE\tEVENT ID\tTYPE\tSTATE\tDELIVERIES\tRUNS")
	for _, e := range page.Events {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", e.ReceivedAt.UTC().Format(time.DateTime), e.Source,
			e.EventID, e.EventType, e.State, e.Deliveries, strings.Join(e.RunStatuses, ","))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	total := strconv.FormatInt(page.Total, 10)
	if page.TotalAtLeast {
		total = "at least " + total
	}
	if total == "1" {
		fmt.Fprintln(w, "1 event matches")
	} else {
		fmt.Fprintf(w, "%s events match\n", total)
	}
	if page.Prev != "" {
		fmt.Fprintf(w, "newer: add --cursor %s\n", page.Prev)
	}
	if page.Next != "" {
		fmt.Fprintf(w, "older: add --cursor %s\n", page.Next)
	}
	return nil
}

func eventsShowCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show SOURCE EVENT_ID",
		Short: "Show one event: payload, headers, runs and the attempt log",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newAdminClient(cmd)
			if err != nil {
				return err
			}
			var d admin.EventDetailJSON
			raw, err := c.get(cmd.Context(), eventPath(args[0], args[1]), nil, &d)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), raw)
			}
			return printEvent(cmd.OutOrStdout(), d)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the admin API's answer (JSON)")
	return cmd
}

// handedOff says whether an event's tasks are in the queue.
func handedOff(e admin.EventJSON) string {
	switch {
	case e.RecordedOnly:
		return "no: imported as delivered elsewhere (--record-only); only a replay forwards it"
	case e.HandedOff:
		return "yes"
	}
	return "pending (the relay will enqueue it)"
}

func printEvent(w io.Writer, d admin.EventDetailJSON) error {
	w = termsafe.NewWriter(w) // payloads and answers come from senders and destinations
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
		d.Source, d.EventID, evType, d.State, ts(&d.ReceivedAt), ts(&d.LastReceivedAt), d.Deliveries, handedOff(d.EventJSON),
		d.ContentType, d.PayloadBytes)
	if d.TraceID != "" {
		fmt.Fprintf(w, "trace       %s\n", d.TraceID)
	}
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
		outcome := dedupe.Attempt{State: at.State, Succeeded: at.Succeeded, Error: at.Error}.Summary()
		fmt.Fprintf(w, "  %s  %s  call %d  HTTP %d  %s  %s\n", at.At.UTC().Format(time.DateTime), at.Key, at.Call, at.StatusCode,
			time.Duration(at.DurationMS*float64(time.Millisecond)), outcome)
		if at.RetryAt != nil {
			fmt.Fprintf(w, "      next try  %s\n", ts(at.RetryAt))
		}
		if len(at.AnswerHeaders) > 0 {
			fmt.Fprintf(w, "      headers   %s\n", at.AnswerHeaders)
		}
		switch {
		case at.AnswerBody != nil:
			body := *at.AnswerBody
			if at.AnswerTruncated {
				body += " … (cut at 4 KiB)"
			}
			fmt.Fprintf(w, "      body      %s\n", body)
		case at.AnswerBodyBase64 != "":
			fmt.Fprintf(w, "      body      (binary, base64) %s\n", at.AnswerBodyBase64)
		}
	}
	fmt.Fprintln(w, "\nheaders:")
	fmt.Fprintln(w, indentOr(d.Headers)) // the API masks credentials
	fmt.Fprintln(w, "\npayload:")
	if d.Payload == nil {
		fmt.Fprintf(w, "(binary, %d bytes)\n", d.PayloadBytes)
		return nil
	}
	_, err := fmt.Fprintln(w, indentOr([]byte(*d.Payload)))
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

// cliUser is the default "by" of a replay, pause or resume from the
// command line.
func cliUser() string {
	if u := os.Getenv("USER"); u != "" {
		return u + " (cli)"
	}
	return "cli"
}
