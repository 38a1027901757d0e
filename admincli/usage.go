package admincli

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/spf13/cobra"

	"github.com/webhookd/webhookd/gateway/admin/adminclient"
)

// exitUsage is the exit code of a command line webhookd does not
// understand, as a shell's builtins and most tools use it: a cron job
// running a misspelt command fails instead of passing with the help.
const exitUsage = 2

// ExitCode is the exit code of a command that ended with err: exitUsage
// for a command line webhookd does not understand, or a filter or value
// the admin API refused as such (400: an unknown source, a bad time),
// else 1.
func ExitCode(err error) int {
	var api *adminclient.APIError
	if errors.As(err, new(usageError)) || errors.As(err, &api) && api.Status == http.StatusBadRequest {
		return exitUsage
	}
	return 1
}

// usageError is a command line webhookd does not understand.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// GroupCommand makes cmd a command that only groups subcommands: without
// arguments it prints its help; with an argument that names none of its
// subcommands it is a usage error naming the closest ones.
func GroupCommand(cmd *cobra.Command) *cobra.Command {
	cmd.Args = cobra.ArbitraryArgs
	if cmd.SuggestionsMinimumDistance == 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(s, " or "))
		}
		var names []string
		for _, c := range cmd.Commands() {
			if c.IsAvailableCommand() {
				names = append(names, c.Name())
			}
		}
		return usageError{msg + "; its commands: " + strings.Join(names, ", ")}
	}
	return cmd
}

// usageArgs wraps an argument check so that a wrong number of arguments
// is a usage error.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError{err.Error()}
		}
		return nil
	}
}

// MarkUsage makes every flag and argument error of cmd and its
// subcommands a usage error.
func MarkUsage(cmd *cobra.Command) {
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err.Error()} })
	if cmd.Args != nil {
		cmd.Args = usageArgs(cmd.Args)
	}
	for _, c := range cmd.Commands() {
		MarkUsage(c)
	}
}
