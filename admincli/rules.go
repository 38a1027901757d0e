package admincli

import (
	"github.com/spf13/cobra"

	"github.com/webhookd/webhookd/gateway/admin"
)

// rulesCommand groups what an operator does with destinations' rules.
func rulesCommand() *cobra.Command {
	cmd := GroupCommand(&cobra.Command{
		Use:   "rules",
		Short: "Try destinations' when and transform rules on stored events (through a running webhookd's admin API)",
	})
	AddServerFlag(cmd)
	cmd.AddCommand(rulesTestCommand())
	return cmd
}

func rulesTestCommand() *cobra.Command {
	var (
		req    admin.RulesTestRequest
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "test --source S --destination D [--when EXPR] [--transform EXPR] [--since 24h] [--limit N]",
		Short: "Evaluate a destination's rules, or the ones given, on its source's newest stored events; nothing is sent",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := NewClient(cmd)
			if err != nil {
				return err
			}
			return c.TestRules(cmd.Context(), cmd.OutOrStdout(), req, asJSON)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&req.Source, "source", "", "the source (required)")
	fl.StringVar(&req.Destination, "destination", "", "the destination whose rules are tried (required)")
	fl.StringVar(&req.When, "when", "", "a when rule to try instead of the configured one")
	fl.StringVar(&req.Transform, "transform", "", "a transform to try instead of the configured one")
	fl.StringVar(&req.Since, "since", "", "events received at or after: RFC 3339 time or a duration ago (24h, 2d)")
	fl.IntVar(&req.Limit, "limit", 0, "at most this many events, newest first (default 100, at most 1000)")
	fl.BoolVar(&asJSON, "json", false, "print the API's JSON")
	_ = cmd.MarkFlagRequired("source")
	_ = cmd.MarkFlagRequired("destination")
	return cmd
}
