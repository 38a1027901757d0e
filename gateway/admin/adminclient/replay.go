package adminclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/webhookd/webhookd/internal/termsafe"
	"github.com/webhookd/webhookd/jobs"
)

// Replay replays one event (the admin API's replay request: force,
// destination, by, reason) and prints what it did per destination. A
// 503 (Redis did not take the task) is printed, then returned as an
// error.
func (c *Client) Replay(ctx context.Context, w io.Writer, source, id string, req map[string]any, asJSON bool) error {
	raw, code, err := c.Call(ctx, http.MethodPost, EventPath(source, id)+"/replay", nil, req, http.StatusServiceUnavailable)
	if err != nil {
		return err
	}
	if asJSON {
		err = PrintJSON(w, raw)
	} else {
		err = printReplay(w, raw)
	}
	if err == nil && code == http.StatusServiceUnavailable {
		err = c.ErrorFor(code, raw)
	}
	return err
}

// Skip lets the entity of the event go on past its failed or dead run
// (req is the admin API's skip request: destination, by, reason) and
// prints what it did per destination; an answer that skipped nothing is
// an error after the print.
func (c *Client) Skip(ctx context.Context, w io.Writer, source, id string, req map[string]any, asJSON bool) error {
	raw, code, err := c.Call(ctx, http.MethodPost, EventPath(source, id)+"/skip", nil, req, http.StatusConflict)
	if err != nil {
		return err
	}
	if asJSON {
		err = PrintJSON(w, raw)
	} else {
		var res jobs.SkipResult
		if err = json.Unmarshal(raw, &res); err != nil {
			return fmt.Errorf("webhookd's answer to the skip is not what this webhookd expects: %w", err)
		}
		tw := termsafe.NewWriter(w)
		for _, r := range res.Runs {
			fmt.Fprintf(tw, "%s	%s	generation %d	%s	%s\n", r.Destination, r.Key, r.Generation, r.Action, r.Status)
		}
	}
	if err == nil && code == http.StatusConflict {
		err = c.ErrorFor(code, raw)
	}
	return err
}

// BulkReplay replays (or, dry, counts and lists) the events req selects
// (the admin API's bulk replay request) and prints what it did.
func (c *Client) BulkReplay(ctx context.Context, w io.Writer, req map[string]any, asJSON bool) error {
	raw, _, err := c.Call(ctx, http.MethodPost, "/admin/replay", nil, req)
	if err != nil {
		return err
	}
	if asJSON {
		return PrintJSON(w, raw)
	}
	return printBulk(w, raw)
}

// printReplay prints what a replay by id did, per destination.
func printReplay(w io.Writer, raw []byte) error {
	var res jobs.ReplayResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("webhookd's answer to the replay is not what this webhookd expects: %w", err)
	}
	w = termsafe.NewWriter(w) // a stored result is a destination's answer
	for _, r := range res.Runs {
		fmt.Fprintf(w, "%s\t%s\tgeneration %d\t%s", r.Destination, r.Key, r.Generation, r.Action)
		if r.Result != nil {
			fmt.Fprintf(w, "\tstored result %s", r.Result)
		}
		if r.Error != "" {
			fmt.Fprintf(w, "\terror: %s", r.Error)
		}
		fmt.Fprintln(w)
	}
	return nil
}

// printBulk prints what a bulk replay did or, dry, would do.
func printBulk(w io.Writer, raw []byte) error {
	var res jobs.BulkResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("webhookd's answer to the bulk replay is not what this webhookd expects: %w", err)
	}
	matched := strconv.FormatInt(res.Matched, 10) + " events match"
	if res.Matched == 1 {
		matched = "1 event matches"
	}
	if res.MatchedAtLeast {
		matched = "at least " + matched
	}
	if res.DryRun {
		fmt.Fprintf(w, "dry run: %s; this call would replay %d (limit %d):\n", matched, res.Selected, res.Limit)
	} else {
		fmt.Fprintf(w, "%s; replayed %d of them (limit %d): %d enqueued, %d failed\n",
			matched, res.Selected, res.Limit, res.Enqueued, res.Failed)
	}
	for _, e := range res.Events {
		line, _ := json.Marshal(e)
		fmt.Fprintf(w, "  %s\n", line)
	}
	if res.Next != "" {
		fmt.Fprintf(w, "more: add --cursor %s\n", res.Next)
	}
	if res.DryRun {
		fmt.Fprintln(w, "nothing was replayed; run again with --dry-run=false to replay")
	}
	if res.Failed > 0 {
		return fmt.Errorf("%d events could not be replayed", res.Failed)
	}
	return nil
}
