package adminclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/webhookd/webhookd/gateway/admin"
	"github.com/webhookd/webhookd/internal/termsafe"
)

// TestRules tries a destination's rules (or the ones req gives) on stored
// events (POST /admin/rules/test) and prints, per event, whether it
// matches and the body it would be sent; nothing is sent or changed.
func (c *Client) TestRules(ctx context.Context, w io.Writer, req admin.RulesTestRequest, asJSON bool) error {
	raw, _, err := c.Call(ctx, http.MethodPost, "/admin/rules/test", nil, req)
	if err != nil {
		return err
	}
	if asJSON {
		return PrintJSON(w, raw)
	}
	var res admin.RulesTestJSON
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("webhookd's answer to the rules test is not what this webhookd expects: %w", err)
	}
	w = termsafe.NewWriter(w) // ids and bodies come from senders
	if res.When != "" {
		fmt.Fprintf(w, "when:      %s\n", res.When)
	}
	if res.Transform != "" {
		fmt.Fprintf(w, "transform: %s\n", res.Transform)
	}
	for _, r := range res.Results {
		switch {
		case r.Error != "":
			fmt.Fprintf(w, "%s\terror (the run would fail): %s\n", r.EventID, r.Error)
		case !r.Match:
			fmt.Fprintf(w, "%s\tno match (filtered)\n", r.EventID)
		case len(r.Body) > 0:
			fmt.Fprintf(w, "%s\tmatch\t%s\n", r.EventID, r.Body)
		default:
			fmt.Fprintf(w, "%s\tmatch\t(the raw body, not JSON)\n", r.EventID)
		}
	}
	fmt.Fprintf(w, "%d of %d events match\n", res.Matched, len(res.Results))
	return nil
}
