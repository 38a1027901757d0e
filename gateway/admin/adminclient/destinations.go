package adminclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/webhookd/webhookd/gateway/admin"
)

// ListDestinations prints every destination with its state, calls in
// flight, failures in a row and pause.
func (c *Client) ListDestinations(ctx context.Context, w io.Writer, asJSON bool) error {
	var list admin.DestinationListJSON
	raw, err := c.Get(ctx, "/admin/destinations", nil, &list)
	if err != nil {
		return err
	}
	if asJSON {
		return PrintJSON(w, raw)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE\tDESTINATION\tSTATE\tIN FLIGHT\tFAILURES IN A ROW\tPAUSED")
	for _, st := range list.Destinations {
		paused := ""
		if st.PausedAt != nil {
			paused = fmt.Sprintf("since %s by %s", st.PausedAt.UTC().Format(time.DateTime), st.PausedBy)
			if st.PauseReason != "" {
				paused += " (" + st.PauseReason + ")"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", st.Source, st.Destination, st.State, st.InFlight, st.ConsecutiveFailures, paused)
	}
	return tw.Flush()
}

// SteerDestination pauses (pause true) or resumes a destination, by and
// for reason, and prints its state after.
func (c *Client) SteerDestination(ctx context.Context, w io.Writer, source, destination string, pause bool, by, reason string, asJSON bool) error {
	verb := "resume"
	if pause {
		verb = "pause"
	}
	path := "/admin/destinations/" + url.PathEscape(source) + "/" + url.PathEscape(destination) + "/" + verb
	raw, _, err := c.Call(ctx, http.MethodPost, path, nil, map[string]string{"by": by, "reason": reason})
	if err != nil {
		return err
	}
	if asJSON {
		return PrintJSON(w, raw)
	}
	var st admin.DestinationJSON
	if err := json.Unmarshal(raw, &st); err != nil {
		return fmt.Errorf("webhookd's answer is not what this webhookd expects: %w", err)
	}
	fmt.Fprintf(w, "%s/%s is %s\n", st.Source, st.Destination, st.State)
	return nil
}

// TestDestination sends a destination a test event (recorded nowhere)
// and prints what the call came to; a test event not delivered is an
// error, so a script can tell.
func (c *Client) TestDestination(ctx context.Context, w io.Writer, source, destination, by string, asJSON bool) error {
	path := "/admin/destinations/" + url.PathEscape(source) + "/" + url.PathEscape(destination) + "/test"
	raw, _, err := c.Call(ctx, http.MethodPost, path, nil, map[string]string{"by": by})
	if err != nil {
		return err
	}
	var res admin.TestEventJSON
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("webhookd's answer is not what this webhookd expects: %w", err)
	}
	if asJSON {
		if err := PrintJSON(w, raw); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(w, "test event %s (key %s) to %s/%s: ", res.EventID, res.Key, source, destination)
		if res.Delivered {
			fmt.Fprint(w, "delivered")
		} else {
			fmt.Fprint(w, "not delivered")
		}
		if res.StatusCode != 0 {
			fmt.Fprintf(w, ", HTTP %d", res.StatusCode)
		}
		if res.Error != "" {
			fmt.Fprintf(w, ": %s", res.Error)
		}
		fmt.Fprintf(w, ", %.0f ms\n", res.DurationMS)
	}
	if !res.Delivered {
		return fmt.Errorf("the test event was not delivered to %s/%s", source, destination)
	}
	return nil
}
