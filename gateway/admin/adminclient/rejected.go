package adminclient

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"text/tabwriter"

	"github.com/webhookd/webhookd/gateway/admin"
	"github.com/webhookd/webhookd/internal/termsafe"
)

// ListRejected prints the newest rejected requests (of source, when not
// empty), at most limit, through GET /admin/rejected.
func (c *Client) ListRejected(ctx context.Context, w io.Writer, source string, limit int, asJSON bool) error {
	q := url.Values{}
	if source != "" {
		q.Set("source", source)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var list admin.RejectedListJSON
	raw, err := c.Get(ctx, "/admin/rejected", q, &list)
	if done, err := doneOrJSON(w, raw, err, asJSON); done {
		return err
	}
	w = termsafe.NewWriter(w) // sources, reasons and addresses come from clients
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME (UTC)\tSOURCE\tSTATUS\tFROM\tBODY\tREASON")
	for _, r := range list.Rejected {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d bytes\t%s\n", r.At.UTC().Format("2006-01-02 15:04:05"), r.Source, r.Status, r.Remote, r.BodyBytes, r.Reason)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "%d rejected requests shown\n", len(list.Rejected))
	return nil
}
