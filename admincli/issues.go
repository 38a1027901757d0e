package admincli

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
)

// issuesCommand lists, shows and resolves issues.
func issuesCommand() *cobra.Command {
	cmd := GroupCommand(&cobra.Command{
		Use:   "issues",
		Short: "A destination's failures grouped by cause: list, show, resolve (through a running webhookd's admin API)",
	})
	AddServerFlag(cmd)
	var (
		state          string
		asJSON         bool
		replay, dryRun bool
		by, reason     string
	)
	list := &cobra.Command{
		Use:   "list [--state open|closed|resolved]",
		Short: "List issues, the most recently seen first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := NewClient(cmd)
			if err != nil {
				return err
			}
			return c.ListIssues(cmd.Context(), cmd.OutOrStdout(), state, asJSON)
		},
	}
	list.Flags().StringVar(&state, "state", "", "only issues in this state")
	list.Flags().BoolVar(&asJSON, "json", false, "print the API's JSON")
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show an issue and the events it affected",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := issueArg(args[0])
			if err != nil {
				return err
			}
			c, err := NewClient(cmd)
			if err != nil {
				return err
			}
			return c.ShowIssue(cmd.Context(), cmd.OutOrStdout(), id, asJSON)
		},
	}
	show.Flags().BoolVar(&asJSON, "json", false, "print the API's JSON")
	resolve := &cobra.Command{
		Use:   "resolve ID [--replay] [--dry-run] --reason TEXT",
		Short: "Resolve an issue; with --replay, replay exactly its affected events that are not done (--dry-run lists them)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := issueArg(args[0])
			if err != nil {
				return err
			}
			c, err := NewClient(cmd)
			if err != nil {
				return err
			}
			return c.ResolveIssue(cmd.Context(), cmd.OutOrStdout(), id, replay, dryRun, by, reason, asJSON)
		},
	}
	resolve.Flags().BoolVar(&replay, "replay", false, "replay the affected events not done")
	resolve.Flags().BoolVar(&dryRun, "dry-run", false, "only list what would be replayed")
	resolve.Flags().StringVar(&by, "by", "", "who resolves (recorded; default admin)")
	resolve.Flags().StringVar(&reason, "reason", "", "why (recorded)")
	resolve.Flags().BoolVar(&asJSON, "json", false, "print the API's JSON")
	cmd.AddCommand(list, show, resolve)
	return cmd
}

// issueArg parses an issue id argument.
func issueArg(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, usageError{fmt.Sprintf("issue id must be a positive integer, not %q", s)}
	}
	return id, nil
}
