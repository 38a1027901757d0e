package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/webhookd/webhookd"
	"github.com/webhookd/webhookd/gateway/admin/adminclient"
	"github.com/webhookd/webhookd/gateway/sender"
)

func sendCommand() *cobra.Command {
	var (
		source, target, id, eventType, bodyArg, contentType, signingKey string
		n, concurrency                                                  int
	)
	cmd := &cobra.Command{
		Use:   "send",
		Short: "Sign a test event as the source's sender would and send it (-n times, -c at once)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := configFrom(cmd)
			if err != nil {
				return err
			}
			var src *webhookd.SourceSpec
			for i, s := range cfg.File.Sources {
				if s.Name == source || (source == "" && i == 0) {
					src = &cfg.File.Sources[i]
					break
				}
			}
			if src == nil {
				return fmt.Errorf("no source %q in %s", source, cfg.Path)
			}
			vcfg := src.Verify
			vcfg.SigningKey = signingKey
			gw := cfg.Process.Sources.Gateway[src.Name]
			ev := sender.Event{Source: src.Name, Verify: vcfg, EventID: gw.EventID, EventType: gw.EventType, ID: id, Type: eventType, Body: []byte(bodyArg)}
			if strings.HasPrefix(bodyArg, "@") {
				if ev.Body, err = os.ReadFile(bodyArg[1:]); err != nil {
					return err
				}
			}
			if cmd.Flags().Changed("content-type") {
				ev.ContentType = contentType
			}
			if target == "" {
				if target, err = adminclient.ServerOf(cfg.Process.Listen); err != nil {
					return err
				}
			}
			req, err := sender.Sign(ev, target, time.Now())
			if err != nil {
				return err
			}
			return sender.Send(cmd.Context(), cmd.OutOrStdout(), req, n, concurrency)
		},
	}
	cmd.Flags().StringVarP(&source, "source", "s", "", "source name (default: the config's first source)")
	cmd.Flags().StringVar(&target, "url", "", "gateway base URL (default: from the config's listen)")
	cmd.Flags().StringVar(&signingKey, "signing-key", "", "the sender's private key, for schemes whose secrets are public keys (discord: hex Ed25519 seed)")
	cmd.Flags().StringVar(&id, "id", "", "event id (default: a new random one, the same for all copies)")
	cmd.Flags().StringVar(&eventType, "type", sender.DefaultType, "event type, sent in the type header of senders that name it there (github's X-GitHub-Event, shopify's X-Shopify-Topic, ...)")
	cmd.Flags().StringVar(&bodyArg, "body", "", "body, or @file (default: a small JSON event)")
	cmd.Flags().StringVar(&contentType, "content-type", "application/json", "Content-Type of the body (twilio: form or JSON, by the body)")
	cmd.Flags().IntVarP(&n, "count", "n", 1, "how many copies to send")
	cmd.Flags().IntVarP(&concurrency, "concurrency", "c", 1, "how many copies in flight at once")
	return cmd
}
