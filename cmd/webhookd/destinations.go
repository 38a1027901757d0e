package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/webhookd/webhookd/gateway/admin"
)

// destinationsCommand lists the destinations' states and pauses and
// resumes them, through a running webhookd's admin API.
func destinationsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "destinations",
		Short: "List destinations with their state; pause and resume one (through a running webhookd's admin API)",
	}
	addServerFlag(cmd)
	cmd.AddCommand(destinationsListCommand(), destinationsSteerCommand(true), destinationsSteerCommand(false))
	return cmd
}

func destinationsListCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List every destination: state (active, paused, open), calls in flight, failures in a row, limits",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newAdminClient(cmd)
			if err != nil {
				return err
			}
			var list admin.DestinationListJSON
			raw, err := c.get(cmd.Context(), "/admin/destinations", nil, &list)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), raw)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SOURCE\tDESTINATION\tSTATE\tIN FLIGHT\tFAILURES IN A ROW\tPAUSED")
			for _, st := range list.Destinations {
				paused := ""
				if st.PausedAt != nil {
					paused = fmt.Sprintf("since %s by %s", st.PausedAt.UTC().Format(time.DateTime), st.PausedBy)
					if st.PauseReason != "" {
						paused += " (" + st.PauseReason + ")"
					}
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", st.Source, st.Destination, st.State, st.InFlight, st.ConsecutiveFailures, paused)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the admin API's answer (JSON)")
	return cmd
}

func destinationsSteerCommand(pause bool) *cobra.Command {
	var (
		by, reason string
		asJSON     bool
	)
	use, short, verb := "resume SOURCE DESTINATION", "Resume a paused destination: the calls that waited go out now", "resume"
	if pause {
		use, short, verb = "pause SOURCE DESTINATION", "Pause a destination: its calls wait (no attempt spent) until resumed; events are still accepted", "pause"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newAdminClient(cmd)
			if err != nil {
				return err
			}
			if by == "" {
				by = cliUser()
			}
			path := "/admin/destinations/" + url.PathEscape(args[0]) + "/" + url.PathEscape(args[1]) + "/" + verb
			raw, _, err := c.call(cmd.Context(), http.MethodPost, path, nil, map[string]string{"by": by, "reason": reason})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), raw)
			}
			var st admin.DestinationJSON
			if err := json.Unmarshal(raw, &st); err != nil {
				return fmt.Errorf("webhookd's answer is not what this webhookd expects: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s/%s is %s\n", st.Source, st.Destination, st.State)
			return nil
		},
	}
	cmd.Flags().StringVar(&by, "by", "", "who (default: the OS user)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the admin API's answer (JSON)")
	if pause {
		cmd.Flags().StringVar(&reason, "reason", "", "why, recorded with the pause")
	}
	return cmd
}
