package adminclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"text/tabwriter"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway/admin"
	"github.com/webhookd/webhookd/internal/termsafe"
)

// timeFormat is how the issue commands print times (UTC).
const timeFormat = "2006-01-02 15:04:05"

// ListIssues prints the issues (in state, when not empty), the most
// recently seen first, through GET /admin/issues.
func (c *Client) ListIssues(ctx context.Context, w io.Writer, state string, asJSON bool) error {
	q := url.Values{}
	if state != "" {
		q.Set("state", state)
	}
	var list admin.IssueListJSON
	raw, err := c.Get(ctx, "/admin/issues", q, &list)
	if done, err := doneOrJSON(w, raw, err, asJSON); done {
		return err
	}
	w = termsafe.NewWriter(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSOURCE\tDESTINATION\tCAUSE\tSTATE\tFAILURES\tEVENTS\tLAST SEEN (UTC)")
	for _, i := range list.Issues {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", i.ID, i.Source, i.Destination, i.Cause, i.State, i.Count, i.EventCount,
			i.LastSeen.UTC().Format(timeFormat))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "%d issues shown\n", len(list.Issues))
	return nil
}

// ShowIssue prints issue id with its affected events, through GET
// /admin/issues/:id.
func (c *Client) ShowIssue(ctx context.Context, w io.Writer, id int64, asJSON bool) error {
	var issue dedupe.Issue
	raw, err := c.Get(ctx, "/admin/issues/"+strconv.FormatInt(id, 10), nil, &issue)
	if done, err := doneOrJSON(w, raw, err, asJSON); done {
		return err
	}
	w = termsafe.NewWriter(w) // event ids come from senders
	fmt.Fprintf(w, "issue %d: %s -> %s failing with %s\nstate: %s", issue.ID, issue.Source, issue.Destination, issue.Cause, issue.State)
	if issue.ResolvedBy != "" {
		fmt.Fprintf(w, " by %s (%s)", issue.ResolvedBy, issue.ResolveReason)
	}
	fmt.Fprintf(w, "\nfailures: %d\nfirst seen: %s\nlast seen: %s\naffected events (%d):\n", issue.Count,
		issue.FirstSeen.UTC().Format(timeFormat), issue.LastSeen.UTC().Format(timeFormat), len(issue.Events))
	for _, e := range issue.Events {
		fmt.Fprintf(w, "  %s\n", e)
	}
	return nil
}

// ResolveIssue resolves issue id through POST /admin/issues/:id/resolve:
// with dryRun it prints the affected events not done; otherwise it
// replays them (with replay) and marks the issue resolved, recording by
// and reason.
func (c *Client) ResolveIssue(ctx context.Context, w io.Writer, id int64, replay, dryRun bool, by, reason string, asJSON bool) error {
	body := map[string]any{"replay": replay, "dry_run": dryRun, "by": by, "reason": reason}
	raw, _, err := c.Call(ctx, http.MethodPost, "/admin/issues/"+strconv.FormatInt(id, 10)+"/resolve", nil, body)
	if done, err := doneOrJSON(w, raw, err, asJSON); done {
		return err
	}
	var res admin.ResolveJSON
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("webhookd's answer to resolve is not what this webhookd expects: %w", err)
	}
	w = termsafe.NewWriter(w)
	if res.DryRun {
		fmt.Fprintf(w, "dry run: %d affected events not done would be replayed to %s:\n", len(res.Events), res.Issue.Destination)
	} else {
		fmt.Fprintf(w, "issue %d is %s; %d events replayed (%d failed):\n", res.Issue.ID, res.Issue.State, len(res.Replayed), res.Failed)
	}
	for _, e := range res.Events {
		status := e.RunStatus
		if status == "" {
			status = "no run"
		}
		fmt.Fprintf(w, "  %s\t%s\n", e.ExternalID, status)
	}
	return nil
}
