package main

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/webhookd/webhookd/admincli"
	"github.com/webhookd/webhookd/dedupe"
)

// checkCommand groups the consistency checks an operator (or a cron job)
// runs against the database.
func checkCommand() *cobra.Command {
	check := admincli.GroupCommand(&cobra.Command{
		Use:   "check",
		Short: "Run consistency checks against the database",
	})
	check.AddCommand(checkDuplicatesCommand())
	return check
}

// checkDuplicatesCommand lists keys the destination accepted more than
// once and exits non-zero when there are any.
func checkDuplicatesCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:        "duplicates",
		SuggestFor: []string{"dupes", "dups"},
		Short:      "List keys with more than one successful destination call (exit 1 if any) and calls of unknown outcome",
		Args:       cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := configFrom(cmd)
			if err != nil {
				return err
			}
			window, _ := cmd.Flags().GetDuration("window")
			ctx := cmd.Context()
			pc, err := pgxpool.ParseConfig(cfg.Process.DatabaseURL)
			if err != nil {
				return fmt.Errorf("error parsing database_url: %w", err)
			}
			pc.MaxConns = 2
			pc.ConnConfig.ConnectTimeout = 5 * time.Second
			pool, err := pgxpool.NewWithConfig(ctx, pc)
			if err != nil {
				return fmt.Errorf("error opening database pool: %w", err)
			}
			defer pool.Close()
			store := dedupe.New(pool)
			keys, err := store.DuplicateKeys(ctx, window)
			if err != nil {
				return err
			}
			unknown, calls, err := store.UnknownCalls(ctx, window)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, k := range keys {
				fmt.Fprintf(out, "duplicate\t%s\t%d successful calls\t%s .. %s\n", k.Key, k.Successes,
					k.First.UTC().Format(time.RFC3339), k.Last.UTC().Format(time.RFC3339))
			}
			for _, c := range calls {
				note := ""
				if c.LaterSuccess {
					note = "\ta later call succeeded"
				}
				fmt.Fprintf(out, "unknown\t%s\tcall %d\t%s%s\n", c.Key, c.Call, c.StartedAt.UTC().Format(time.RFC3339), note)
			}
			fmt.Fprintf(out, "in the last %s: %d keys called successfully more than once; %d calls of unknown outcome (a worker stopped mid-call: possible duplicates at the destination)\n",
				window, len(keys), unknown)
			if len(keys) > 0 {
				return fmt.Errorf("%d keys had more than one successful destination call in the last %s", len(keys), window)
			}
			return nil
		},
	}
	cmd.Flags().Duration("window", dedupe.DefaultDuplicateWindow, "how far back to look")
	return cmd
}
