package adminclient

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/webhookd/webhookd/gateway/admin"
	"github.com/webhookd/webhookd/internal/termsafe"
)

// ListHeldEntities prints the entities whose events wait for order
// (fifo), oldest wait first: each one's destination, the event it waits
// behind with that run's status, how many wait and since when, through
// GET /admin/entities?state=held (of source and destination when not
// empty; at most limit when positive).
func (c *Client) ListHeldEntities(ctx context.Context, w io.Writer, source, destination string, limit int, asJSON bool) error {
	q := url.Values{"state": {"held"}}
	if source != "" {
		q.Set("source", source)
	}
	if destination != "" {
		q.Set("destination", destination)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var list admin.HeldEntitiesJSON
	raw, err := c.Get(ctx, "/admin/entities", q, &list)
	if done, err := doneOrJSON(w, raw, err, asJSON); done {
		return err
	}
	w = termsafe.NewWriter(w) // entities and event ids come from senders
	if len(list.Entities) == 0 {
		_, err := fmt.Fprintln(w, "no entity is waiting for order")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE\tDESTINATION\tENTITY\tWAITS BEHIND\tITS STATUS\tWAITING\tSINCE (UTC)")
	for _, h := range list.Entities {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s (%s)\n", h.Source, h.Destination, h.Entity, h.Behind, h.BehindStatus,
			h.Waiting, h.Since.UTC().Format(time.DateTime), time.Since(h.Since).Round(time.Second))
	}
	return tw.Flush()
}
