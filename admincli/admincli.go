// Package admincli is webhookd's operator commands over a running
// gateway's admin API (events, replay, destinations, rules, rejected, issues),
// and what every command shares: the --server flag and the admin client,
// and the usage errors that exit 2. Package main parses and calls.
package admincli

import "github.com/spf13/cobra"

// Commands returns the operator commands that talk to the admin API.
func Commands() []*cobra.Command {
	return []*cobra.Command{eventsCommand(), replayCommand(), destinationsCommand(), rulesCommand(), rejectedCommand(), issuesCommand()}
}
