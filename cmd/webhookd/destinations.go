package main

import (
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/webhookd/webhookd/jobs"
)

// destinationsCommand lists the destinations' states and pauses and
// resumes them, as the admin API does.
func destinationsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "destinations",
		Short: "List destinations with their state; pause and resume one",
	}
	cmd.AddCommand(destinationsListCommand(), destinationsSteerCommand(true), destinationsSteerCommand(false))
	return cmd
}

// openDestinations opens what the destination commands need.
func openDestinations(cmd *cobra.Command) (*jobs.Destinations, func(), error) {
	a, done, err := openCLI(cmd, true)
	if err != nil {
		return nil, nil, err
	}
	d := jobs.NewDestinations(a.store, a.enqueuer, a.cfg.routes(), jobs.DestinationsConfig{Logger: a.log})
	return d, done, nil
}

func destinationsListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List every destination: state (active, paused, open), calls in flight, failures in a row, limits",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, done, err := openDestinations(cmd)
			if err != nil {
				return err
			}
			defer done()
			list, err := d.List(cmd.Context())
			if err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), "Redis did not answer: states and calls in flight are unknown:", err)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SOURCE\tDESTINATION\tSTATE\tIN FLIGHT\tFAILURES IN A ROW\tPAUSED")
			for _, st := range list {
				paused := ""
				if p := st.Pause; p != nil {
					paused = fmt.Sprintf("since %s by %s", p.PausedAt.UTC().Format(time.DateTime), p.PausedBy)
					if p.Reason != "" {
						paused += " (" + p.Reason + ")"
					}
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", st.Source, st.Destination, st.State, st.InFlight, st.ConsecutiveFailures, paused)
			}
			return tw.Flush()
		},
	}
}

func destinationsSteerCommand(pause bool) *cobra.Command {
	var by, reason string
	use, short := "resume SOURCE DESTINATION", "Resume a paused destination: the calls that waited go out now"
	if pause {
		use, short = "pause SOURCE DESTINATION", "Pause a destination: its calls wait (no attempt spent) until resumed; events are still accepted"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, done, err := openDestinations(cmd)
			if err != nil {
				return err
			}
			defer done()
			if by == "" {
				by = cliUser()
			}
			var st jobs.DestinationStatus
			if pause {
				st, err = d.Pause(cmd.Context(), args[0], args[1], by, reason)
			} else {
				st, err = d.Resume(cmd.Context(), args[0], args[1], by)
			}
			if errors.Is(err, jobs.ErrUnknownDestination) {
				return fmt.Errorf("%s/%s is not a configured destination", args[0], args[1])
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s/%s is %s\n", st.Source, st.Destination, st.State)
			return nil
		},
	}
	cmd.Flags().StringVar(&by, "by", "", "who (default: the OS user)")
	if pause {
		cmd.Flags().StringVar(&reason, "reason", "", "why, recorded with the pause")
	}
	return cmd
}
