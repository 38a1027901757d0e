package admincli

import (
	"github.com/spf13/cobra"
)

// rejectedCommand shows the requests the gateway answered 4xx.
func rejectedCommand() *cobra.Command {
	cmd := GroupCommand(&cobra.Command{
		Use:   "rejected",
		Short: "Requests to /webhooks answered 4xx, newest first (through a running webhookd's admin API)",
	})
	AddServerFlag(cmd)
	var (
		source string
		limit  int
		asJSON bool
	)
	list := &cobra.Command{
		Use:   "list [--source S] [--limit N]",
		Short: "List rejected requests: time, source, status, client, body size, reason",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := NewClient(cmd)
			if err != nil {
				return err
			}
			return c.ListRejected(cmd.Context(), cmd.OutOrStdout(), source, limit, asJSON)
		},
	}
	list.Flags().StringVar(&source, "source", "", "only this source's")
	list.Flags().IntVar(&limit, "limit", 0, "at most this many (default 50, at most 500)")
	list.Flags().BoolVar(&asJSON, "json", false, "print the API's JSON")
	cmd.AddCommand(list)
	return cmd
}
