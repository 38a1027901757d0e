package admincli

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/webhookd/webhookd/gateway/admin"
)

func eventsCommand() *cobra.Command {
	cmd := GroupCommand(&cobra.Command{
		Use:   "events",
		Short: "List, search and show recorded events (through a running webhookd's admin API)",
	})
	AddServerFlag(cmd)
	cmd.AddCommand(eventsListCommand(), eventsShowCommand(), eventsHeldCommand())
	return cmd
}

// eventFilterFlags are the filters of events list and bulk replay, as the
// admin API names them.
type eventFilterFlags struct {
	source, state, since, until, q, eventType, destination, status string
}

func (f *eventFilterFlags) add(cmd *cobra.Command, prefix string) {
	fl := cmd.Flags()
	fl.StringVar(&f.source, "source", "", prefix+"only this source")
	fl.StringVar(&f.state, "state", "", prefix+"only this state: "+strings.Join(admin.States, ", "))
	fl.StringVar(&f.since, "since", "", prefix+"received at or after: RFC 3339 time or a duration ago (24h)")
	fl.StringVar(&f.until, "until", "", prefix+"received before: RFC 3339 time or a duration ago")
	fl.StringVar(&f.q, "q", "", prefix+"event id, exact or a prefix (case-sensitive)")
	fl.StringVar(&f.eventType, "type", "", prefix+"event type, a glob over the whole type (charge.*, orders/*)")
	fl.StringVar(&f.destination, "destination", "", prefix+"only events with this destination (its name, in any source)")
	fl.StringVar(&f.status, "status", "", prefix+"only events with a run in this status: running, done, failed, dead, skipped_stale")
}

// names are the flags of the filter, for refusing them where they do not
// apply.
func (f *eventFilterFlags) names() []string {
	return []string{"source", "state", "since", "until", "q", "type", "status"}
}

func (f *eventFilterFlags) query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"source": f.source, "state": f.state, "since": f.since, "until": f.until,
		"q": f.q, "type": f.eventType, "destination": f.destination, "status": f.status} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

func eventsListCommand() *cobra.Command {
	var (
		filter eventFilterFlags
		cursor string
		limit  int
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List events, newest first, with a count (filters: --q, --type, --source, --destination, --state, --status, --since, --until)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := NewClient(cmd)
			if err != nil {
				return err
			}
			q := filter.query()
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			q.Set("limit", strconv.Itoa(limit))
			return c.ListEvents(cmd.Context(), cmd.OutOrStdout(), q, asJSON)
		},
	}
	filter.add(cmd, "")
	fl := cmd.Flags()
	fl.StringVar(&cursor, "cursor", "", "continue from a previous page (the cursor it printed)")
	fl.IntVar(&limit, "limit", 50, "events per page (at most 1000)")
	fl.BoolVar(&asJSON, "json", false, "print the admin API's answer (JSON)")
	return cmd
}

func eventsShowCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show SOURCE EVENT_ID",
		Short: "Show one event: payload, headers, runs and the attempt log",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := NewClient(cmd)
			if err != nil {
				return err
			}
			return c.ShowEvent(cmd.Context(), cmd.OutOrStdout(), args[0], args[1], asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the admin API's answer (JSON)")
	return cmd
}

func eventsHeldCommand() *cobra.Command {
	var (
		source, destination string
		limit               int
		asJSON              bool
	)
	cmd := &cobra.Command{
		Use:   "held",
		Short: "List the entities waiting for order (fifo): what each waits behind, how many events, since when",
		Long: `List the entities whose events wait on a destination behind an earlier event
that is not settled (order mode fifo), oldest wait first. One behind a dead
or failed event (on_failure: hold) waits until that event is replayed, or
skipped: webhookd replay --skip SOURCE EVENT_ID --destination NAME --reason R.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := NewClient(cmd)
			if err != nil {
				return err
			}
			return c.ListHeldEntities(cmd.Context(), cmd.OutOrStdout(), source, destination, limit, asJSON)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&source, "source", "", "only this source's entities")
	fl.StringVar(&destination, "destination", "", "only this destination's")
	fl.IntVar(&limit, "limit", 100, "at most this many entities (at most 1000)")
	fl.BoolVar(&asJSON, "json", false, "print the admin API's answer (JSON)")
	return cmd
}
