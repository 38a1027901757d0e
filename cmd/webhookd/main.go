// Command webhookd is the webhook receiver gateway: it records each
// delivery once in Postgres and forwards each event exactly once through
// an Asynq queue. See README.md.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/webhookd/webhookd"
	"github.com/webhookd/webhookd/admincli"
	"github.com/webhookd/webhookd/config"
	"github.com/webhookd/webhookd/migrations"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := rootCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "webhookd:", err)
		os.Exit(admincli.ExitCode(err))
	}
}

func rootCommand() *cobra.Command {
	root := admincli.GroupCommand(&cobra.Command{
		Use:           "webhookd",
		Short:         "Webhook receiver gateway: every event recorded once, forwarded exactly once",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version(),
	})
	root.PersistentFlags().StringP("config", "f", config.DefaultPath, "config file (YAML)")
	root.AddCommand(
		processCommand("serve", "Run the gateway and the worker in one process", webhookd.Roles{Gateway: true, Worker: true}),
		processCommand("gateway", "Run only the gateway (receive, record, hand off)", webhookd.Roles{Gateway: true}),
		processCommand("worker", "Run only the worker (claim, forward, recover)", webhookd.Roles{Worker: true}),
		migrateCommand(),
		demoCommand(),
		sinkCommand(),
		sendCommand(),
		checkCommand(),
		importCommand(),
		listenCommand(),
	)
	root.AddCommand(admincli.Commands()...)
	admincli.MarkUsage(root)
	return root
}

// version is what --version prints.
func version() string {
	b := webhookd.ReadBuildInfo()
	return fmt.Sprintf("%s (revision %s, %s)", b.Version, cmp.Or(b.Revision, "unknown"), b.GoVersion)
}

// configFrom loads the file -f names, or webhookd.yaml; when that default
// is missing the error says how to name another.
func configFrom(cmd *cobra.Command) (*config.Config, error) {
	path, _ := cmd.Flags().GetString("config")
	cfg, err := config.Load(path)
	if errors.Is(err, fs.ErrNotExist) && !cmd.Flags().Changed("config") {
		return nil, config.NotFoundHint(path)
	}
	return cfg, err
}

func processCommand(name, short string, r webhookd.Roles) *cobra.Command {
	return &cobra.Command{
		Use:   name,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := configFrom(cmd)
			if err != nil {
				return err
			}
			return serve(cmd.Context(), cfg, r, newLogger(cfg.LogLevel))
		},
	}
}

func migrateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Apply pending database migrations and exit",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := configFrom(cmd)
			if err != nil {
				return err
			}
			version, err := migrations.Up(cmd.Context(), cfg.Process.DatabaseURL)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "database schema at version %d\n", version)
			return nil
		},
	}
}
