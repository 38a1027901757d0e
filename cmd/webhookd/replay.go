package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/webhookd/webhookd/internal/termsafe"
	"github.com/webhookd/webhookd/jobs"
)

func replayCommand() *cobra.Command {
	var (
		filter                 eventFilterFlags
		force, allDestinations bool
		by, reason, cursor     string
		limit                  int
		dryRun, asJSON         bool
	)
	cmd := &cobra.Command{
		Use:   "replay SOURCE EVENT_ID | replay --source S --state failed --since 24h [--dry-run=false]",
		Short: "Replay one event by id, or events matching a filter (bulk: a dry run unless --dry-run=false)",
		Long: `Replay one event by id, safely: a done run answers with its stored result and
calls nothing; a failed or dead run is retried with the same key (attempts
reset). --force starts a new generation (<key>#N) that the destination
receives again: it must name --destination NAME or --all-destinations, and
give --reason (recorded with --by on the run).

Without SOURCE and EVENT_ID, replay the events matching the filter flags
(--source, --state, --since, --until, --q, --type, --destination,
--status), newest first, at most --limit per call. Bulk replay is a dry run
(a count and a list) unless --dry-run=false; continue with the --cursor it
prints. A flag that does not apply to the form used is an error.

It talks to a running webhookd (--server) with the token in
$WEBHOOKD_ADMIN_TOKEN.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 0 && len(args) != 2 {
				return errors.New("give SOURCE and EVENT_ID, or none with filter flags for a bulk replay")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			single := len(args) == 2
			if err := replayFlagsApply(cmd, single, filter.names()); err != nil {
				return err
			}
			destination := filter.destination
			if force {
				if destination == "" && !allDestinations {
					return errors.New("--force sends the event again, even to destinations that are done: name --destination NAME or --all-destinations")
				}
				if reason == "" {
					return errors.New("--force needs --reason (recorded on the run)")
				}
			}
			if allDestinations {
				if destination != "" {
					return errors.New("give --destination or --all-destinations, not both")
				}
				destination = jobs.AllDestinations
			}
			c, err := newAdminClient(cmd)
			if err != nil {
				return err
			}
			if by == "" {
				by = cliUser()
			}
			out := cmd.OutOrStdout()
			if single {
				body := map[string]any{"force": force, "destination": destination, "by": by, "reason": reason}
				raw, code, err := c.call(cmd.Context(), http.MethodPost, eventPath(args[0], args[1])+"/replay", nil, body, http.StatusServiceUnavailable)
				if err != nil {
					return err
				}
				if asJSON {
					if err := printJSON(out, raw); err != nil {
						return err
					}
				} else if err := printReplay(out, raw); err != nil {
					return err
				}
				if code == http.StatusServiceUnavailable {
					return c.errorFor(code, raw)
				}
				return nil
			}
			body := map[string]any{"dry_run": dryRun, "force": force, "by": by, "reason": reason, "cursor": cursor, "limit": limit}
			for k, v := range filter.query() {
				body[k] = v[0]
			}
			body["destination"] = destination
			raw, _, err := c.call(cmd.Context(), http.MethodPost, "/admin/replay", nil, body)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(out, raw)
			}
			return printBulk(out, raw)
		},
	}
	filter.add(cmd, "bulk: ")
	fl := cmd.Flags()
	fl.Lookup("destination").Usage = "replay to this destination only (bulk: and only events that have it)"
	fl.BoolVar(&force, "force", false, "start a new generation (<key>#N) even for a done event; the destination gets it again (needs --destination or --all-destinations, and --reason)")
	fl.BoolVar(&allDestinations, "all-destinations", false, "with --force: every destination of the event")
	fl.StringVar(&by, "by", "", "who asks, recorded on the run (default: $USER (cli))")
	fl.StringVar(&reason, "reason", "", "why, recorded on the run")
	fl.StringVar(&cursor, "cursor", "", "bulk: continue after the previous call")
	fl.IntVar(&limit, "limit", 100, "bulk: at most this many events per call (at most 1000)")
	fl.BoolVar(&dryRun, "dry-run", true, "bulk: only count and list")
	fl.BoolVar(&asJSON, "json", false, "print the admin API's answer (JSON)")
	addServerFlag(cmd)
	return cmd
}

// replayFlagsApply returns an error naming a flag given that does not
// apply to the form used: the filter and bulk flags with an id, and
// --all-destinations without --force.
func replayFlagsApply(cmd *cobra.Command, single bool, filterFlags []string) error {
	fl := cmd.Flags()
	if single {
		for _, name := range append(filterFlags, "cursor", "limit", "dry-run") {
			if fl.Changed(name) {
				return fmt.Errorf("--%s applies to a bulk replay (without SOURCE EVENT_ID), not to one event", name)
			}
		}
	}
	if fl.Changed("all-destinations") && !fl.Changed("force") {
		return errors.New("--all-destinations applies only with --force (a replay without it already covers every destination that needs it)")
	}
	return nil
}

// printReplay prints what a replay by id did, per destination.
func printReplay(w io.Writer, raw []byte) error {
	var res jobs.ReplayResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("webhookd's answer to the replay is not what this webhookd expects: %w", err)
	}
	w = termsafe.NewWriter(w) // a stored result is a destination's answer
	for _, r := range res.Runs {
		fmt.Fprintf(w, "%s\t%s\tgeneration %d\t%s", r.Destination, r.Key, r.Generation, r.Action)
		if r.Result != nil {
			fmt.Fprintf(w, "\tstored result %s", r.Result)
		}
		if r.Error != "" {
			fmt.Fprintf(w, "\terror: %s", r.Error)
		}
		fmt.Fprintln(w)
	}
	return nil
}

// printBulk prints what a bulk replay did or, dry, would do.
func printBulk(w io.Writer, raw []byte) error {
	var res jobs.BulkResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("webhookd's answer to the bulk replay is not what this webhookd expects: %w", err)
	}
	matched := strconv.FormatInt(res.Matched, 10) + " events match"
	if res.Matched == 1 {
		matched = "1 event matches"
	}
	if res.MatchedAtLeast {
		matched = "at least " + matched
	}
	if res.DryRun {
		fmt.Fprintf(w, "dry run: %s; this call would replay %d (limit %d):\n", matched, res.Selected, res.Limit)
	} else {
		fmt.Fprintf(w, "%s; replayed %d of them (limit %d): %d enqueued, %d failed\n",
			matched, res.Selected, res.Limit, res.Enqueued, res.Failed)
	}
	for _, e := range res.Events {
		line, _ := json.Marshal(e)
		fmt.Fprintf(w, "  %s\n", line)
	}
	if res.Next != "" {
		fmt.Fprintf(w, "more: add --cursor %s\n", res.Next)
	}
	if res.DryRun {
		fmt.Fprintln(w, "nothing was replayed; run again with --dry-run=false to replay")
	}
	if res.Failed > 0 {
		return fmt.Errorf("%d events could not be replayed", res.Failed)
	}
	return nil
}
