package main

import (
	"github.com/spf13/cobra"

	"github.com/webhookd/webhookd/admincli"
	"github.com/webhookd/webhookd/listen"
)

// listenCommand follows a running gateway's events and forwards each to
// a local URL (package listen); --server and $WEBHOOKD_ADMIN_TOKEN find
// the gateway as for the other operator commands.
func listenCommand() *cobra.Command {
	var cfg listen.Config
	cmd := &cobra.Command{
		Use:   "listen",
		Short: "Forward the events a running gateway records to a local URL, resuming where it stopped (no tunnel, no inbound port)",
		Long: `Follows the events a running webhookd gateway records (GET /admin/events/stream; a read-only
admin token in $WEBHOOKD_ADMIN_TOKEN is enough) and POSTs each to --forward-to, in order, with its raw
body, its original headers and the Webhookd-* headers (Idempotency-Key <source>:listen:<id>). The
cursor of the last event answered is kept in a state file: after a sleep, a network drop or a restart
it resumes there. The local URL is retried while it is down.`,
		Example: `  WEBHOOKD_ADMIN_TOKEN=… webhookd listen --server https://hooks.example.com \
    --forward-to http://localhost:3000/webhooks --source stripe --resign whsec_local`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := admincli.NewClient(cmd)
			if err != nil {
				return err
			}
			cfg.Admin = c
			cfg.Out, cfg.Err = cmd.OutOrStdout(), cmd.ErrOrStderr()
			return listen.Run(cmd.Context(), cfg)
		},
	}
	admincli.AddServerFlag(cmd)
	fl := cmd.Flags()
	fl.StringVar(&cfg.ForwardTo, "forward-to", "", "the local URL each event is POSTed to (required; loopback unless --allow-remote)")
	fl.BoolVar(&cfg.AllowRemote, "allow-remote", false, "let --forward-to name another machine")
	fl.StringVar(&cfg.Source, "source", "", "only this source's events")
	fl.StringVar(&cfg.Type, "type", "", "only events whose type matches this glob (invoice.*)")
	fl.StringVar(&cfg.From, "from", "", "where to start: now, a cursor, or a time (RFC 3339, or a duration ago: 1h); default: where the state file says, else now")
	fl.StringVar(&cfg.Resign, "resign", "", "a development secret: forward each event signed with it by its source's scheme")
	fl.StringVar(&cfg.StatePath, "state", "", "the state file keeping the cursor (default: one per server under the user's config directory)")
	fl.BoolVar(&cfg.JSON, "json", false, "print one JSON object per event (and per notice, on stderr)")
	_ = cmd.MarkFlagRequired("forward-to")
	return cmd
}
