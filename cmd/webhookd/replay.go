package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/webhookd/webhookd/gateway/admin"
)

func replayCommand() *cobra.Command {
	var (
		force                               bool
		destination, by, reason             string
		source, state, since, until, cursor string
		limit                               int
		dryRun                              bool
	)
	cmd := &cobra.Command{
		Use:   "replay [SOURCE EVENT_ID] | replay --source S --state failed --since 24h [--dry-run=false]",
		Short: "Replay one event by id, or events matching a filter (bulk: a dry run unless --dry-run=false)",
		Long: `Replay one event by id, safely: a done run answers with its stored result and
calls nothing; a failed or dead run is retried with the same key (attempts
reset); --force starts a new generation (<key>#N), recorded with --by and
--reason.

Without SOURCE and EVENT_ID, replay the events matching --source, --state,
--since and --until, newest first, at most --limit per call. Bulk replay is
a dry run (a count and a list) unless --dry-run=false; continue with the
--cursor it prints.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 0 && len(args) != 2 {
				return errors.New("give SOURCE and EVENT_ID, or none with filter flags for a bulk replay")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			a, done, err := openCLI(cmd, true)
			if err != nil {
				return err
			}
			defer done()
			adm := newAdmin(a)
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			if by == "" {
				by = cliUser()
			}
			if len(args) == 2 {
				res, err := adm.Replay(ctx, admin.ReplayRequest{
					Source: args[0], EventID: args[1], Destination: destination, Force: force, By: by, Reason: reason,
				})
				for _, r := range res.Runs {
					fmt.Fprintf(out, "%s\t%s\tgeneration %d\t%s", r.Destination, r.Key, r.Generation, r.Action)
					if r.Result != nil {
						fmt.Fprintf(out, "\tstored result %s", r.Result)
					}
					if r.Error != "" {
						fmt.Fprintf(out, "\terror: %s", r.Error)
					}
					fmt.Fprintln(out)
				}
				return err
			}
			f, err := cliFilter(a, source, state, since, until)
			if err != nil {
				return err
			}
			res, err := adm.BulkReplay(ctx, admin.BulkRequest{
				Source: f.Source, State: f.State, Since: f.Since, Until: f.Until, Cursor: cursor, Limit: limit,
				DryRun: dryRun, Force: force, By: by, Reason: reason,
			})
			if err != nil {
				return err
			}
			matched := strconv.FormatInt(res.Matched, 10)
			if res.MatchedAtLeast {
				matched = "at least " + matched
			}
			if dryRun {
				fmt.Fprintf(out, "dry run: %s events match; this call would replay %d (limit %d):\n", matched, res.Selected, res.Limit)
			} else {
				fmt.Fprintf(out, "%s events match; replayed %d of them (limit %d): %d enqueued, %d failed\n",
					matched, res.Selected, res.Limit, res.Enqueued, res.Failed)
			}
			for _, e := range res.Events {
				line, _ := json.Marshal(e)
				fmt.Fprintf(out, "  %s\n", line)
			}
			if res.Next != "" {
				fmt.Fprintf(out, "more: add --cursor %s\n", res.Next)
			}
			if dryRun {
				fmt.Fprintln(out, "nothing was replayed; run again with --dry-run=false to replay")
			}
			if res.Failed > 0 {
				return fmt.Errorf("%d events could not be replayed", res.Failed)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&force, "force", false, "start a new generation (<key>#N) even for a done event; the destination gets it again")
	fl.StringVar(&destination, "destination", "", "replay to this destination only (single event)")
	fl.StringVar(&by, "by", "", "who asks, recorded on the run (default: $USER (cli))")
	fl.StringVar(&reason, "reason", "", "why, recorded on the run")
	fl.StringVar(&source, "source", "", "bulk: only this source")
	fl.StringVar(&state, "state", "", "bulk: only this state (failed, dead, …)")
	fl.StringVar(&since, "since", "", "bulk: received at or after (RFC 3339 or a duration ago, 24h)")
	fl.StringVar(&until, "until", "", "bulk: received before")
	fl.StringVar(&cursor, "cursor", "", "bulk: continue after the previous call")
	fl.IntVar(&limit, "limit", 100, "bulk: at most this many events per call (at most 1000)")
	fl.BoolVar(&dryRun, "dry-run", true, "bulk: only count and list")
	return cmd
}
