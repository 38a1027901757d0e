package admincli

import (
	"github.com/spf13/cobra"
)

// destinationsCommand lists the destinations' states and pauses and
// resumes them, through a running webhookd's admin API.
func destinationsCommand() *cobra.Command {
	cmd := GroupCommand(&cobra.Command{
		Use:   "destinations",
		Short: "List destinations with their state; pause, resume or send a test event to one (through a running webhookd's admin API)",
	})
	AddServerFlag(cmd)
	cmd.AddCommand(destinationsListCommand(), destinationsSteerCommand(true), destinationsSteerCommand(false), destinationsTestCommand())
	return cmd
}

func destinationsListCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List every destination: state (active, paused, open), calls in flight, failures in a row, limits",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := NewClient(cmd)
			if err != nil {
				return err
			}
			return c.ListDestinations(cmd.Context(), cmd.OutOrStdout(), asJSON)
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
	use, short := "resume SOURCE DESTINATION", "Resume a paused destination: the calls that waited go out now"
	if pause {
		use, short = "pause SOURCE DESTINATION", "Pause a destination: its calls wait (no attempt spent) until resumed; events are still accepted"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := NewClient(cmd)
			if err != nil {
				return err
			}
			if by == "" {
				by = cliUser()
			}
			return c.SteerDestination(cmd.Context(), cmd.OutOrStdout(), args[0], args[1], pause, by, reason, asJSON)
		},
	}
	cmd.Flags().StringVar(&by, "by", "", "who (default: the OS user)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the admin API's answer (JSON)")
	if pause {
		cmd.Flags().StringVar(&reason, "reason", "", "why, recorded with the pause")
	}
	return cmd
}

func destinationsTestCommand() *cobra.Command {
	var (
		by     string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "test SOURCE DESTINATION",
		Short: "Send a destination a test event now (webhookd.test, a key of its own, Webhookd-Test: 1; recorded nowhere); fails if not delivered",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := NewClient(cmd)
			if err != nil {
				return err
			}
			if by == "" {
				by = cliUser()
			}
			return c.TestDestination(cmd.Context(), cmd.OutOrStdout(), args[0], args[1], by, asJSON)
		},
	}
	cmd.Flags().StringVar(&by, "by", "", "who (default: the OS user)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the admin API's answer (JSON)")
	return cmd
}
