package admincli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/webhookd/webhookd/jobs"
)

func replayCommand() *cobra.Command {
	var (
		filter                 eventFilterFlags
		force, allDestinations bool
		skip                   bool
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

--skip SOURCE EVENT_ID lets the event's entity go on past it instead
(order mode fifo, on_failure hold): its failed or dead run is recorded as
skipped (--by, --reason, needed) and the entity's later events, held
behind it, are called in order. It names --destination NAME or
--all-destinations like --force.

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
			if skip && (!single || force) {
				return errors.New("--skip takes SOURCE EVENT_ID and no --force: it lets the entity go on past that event")
			}
			if force || skip {
				if destination == "" && !allDestinations {
					if skip {
						return errors.New("--skip lets the entity's later events go out past this one: name --destination NAME or --all-destinations")
					}
					return errors.New("--force sends the event again, even to destinations that are done: name --destination NAME or --all-destinations")
				}
				if reason == "" && skip {
					return errors.New("--skip needs --reason (recorded on the run)")
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
			c, err := NewClient(cmd)
			if err != nil {
				return err
			}
			if by == "" {
				by = cliUser()
			}
			out := cmd.OutOrStdout()
			if skip {
				req := map[string]any{"destination": destination, "by": by, "reason": reason}
				return c.Skip(cmd.Context(), out, args[0], args[1], req, asJSON)
			}
			if single {
				req := map[string]any{"force": force, "destination": destination, "by": by, "reason": reason}
				return c.Replay(cmd.Context(), out, args[0], args[1], req, asJSON)
			}
			req := map[string]any{"dry_run": dryRun, "force": force, "by": by, "reason": reason, "cursor": cursor, "limit": limit}
			for k, v := range filter.query() {
				req[k] = v[0]
			}
			req["destination"] = destination
			return c.BulkReplay(cmd.Context(), out, req, asJSON)
		},
	}
	filter.add(cmd, "bulk: ")
	fl := cmd.Flags()
	fl.Lookup("destination").Usage = "replay to this destination only (bulk: and only events that have it)"
	fl.BoolVar(&force, "force", false, "start a new generation (<key>#N) even for a done event; the destination gets it again (needs --destination or --all-destinations, and --reason)")
	fl.BoolVar(&allDestinations, "all-destinations", false, "with --force or --skip: every destination of the event")
	fl.BoolVar(&skip, "skip", false, "let the event's entity go on past its failed or dead run (order mode fifo; needs --destination or --all-destinations, and --reason)")
	fl.StringVar(&by, "by", "", "who asks, recorded on the run (default: $USER (cli))")
	fl.StringVar(&reason, "reason", "", "why, recorded on the run")
	fl.StringVar(&cursor, "cursor", "", "bulk: continue after the previous call")
	fl.IntVar(&limit, "limit", 100, "bulk: at most this many events per call (at most 1000)")
	fl.BoolVar(&dryRun, "dry-run", true, "bulk: only count and list")
	fl.BoolVar(&asJSON, "json", false, "print the admin API's answer (JSON)")
	AddServerFlag(cmd)
	return cmd
}

// replayFlagsApply returns an error naming a flag given that does not
// apply to the form used: the filter and bulk flags with an id, and
// --all-destinations without --force or --skip.
func replayFlagsApply(cmd *cobra.Command, single bool, filterFlags []string) error {
	fl := cmd.Flags()
	if single {
		for _, name := range append(filterFlags, "cursor", "limit", "dry-run") {
			if fl.Changed(name) {
				return fmt.Errorf("--%s applies to a bulk replay (without SOURCE EVENT_ID), not to one event", name)
			}
		}
	}
	if fl.Changed("all-destinations") && !fl.Changed("force") && !fl.Changed("skip") {
		return errors.New("--all-destinations applies only with --force or --skip (a replay without them already covers every destination that needs it)")
	}
	return nil
}
