package admin

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/jobs"
)

// issueStore reads and resolves issues; *dedupe.Store satisfies it.
type issueStore interface {
	ListIssues(ctx context.Context, f dedupe.IssueFilter) ([]dedupe.Issue, error)
	GetIssue(ctx context.Context, id int64) (dedupe.Issue, error)
	IssueEventsNotDone(ctx context.Context, id int64) (dedupe.Issue, []dedupe.IssueEvent, error)
	ResolveIssue(ctx context.Context, id int64, by, reason string) (dedupe.Issue, error)
}

// IssueListJSON is GET /admin/issues's answer.
type IssueListJSON struct {
	Issues []dedupe.Issue `json:"issues"`
}

// listIssues handles GET /admin/issues[?state=open|closed|resolved].
func (a *Admin) listIssues(c echo.Context) error {
	issues, _, err := a.issuesAsked(c)
	if err != nil {
		return err
	}
	if issues == nil {
		issues = []dedupe.Issue{}
	}
	return c.JSON(http.StatusOK, IssueListJSON{Issues: issues})
}

// issueID reads the :id path parameter.
func issueID(c echo.Context) (int64, error) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, echo.NewHTTPError(http.StatusBadRequest, "issue id must be a positive integer")
	}
	return id, nil
}

// issueOf reads the issue the request's :id names: a 400 for an id
// that is not one, a 404 for none.
func (a *Admin) issueOf(c echo.Context) (dedupe.Issue, error) {
	id, err := issueID(c)
	if err != nil {
		return dedupe.Issue{}, err
	}
	issue, err := a.cfg.Issues.GetIssue(c.Request().Context(), id)
	if errors.Is(err, dedupe.ErrNotFound) {
		return dedupe.Issue{}, echo.NewHTTPError(http.StatusNotFound, "issue not found")
	}
	if err != nil {
		return dedupe.Issue{}, httpError(err)
	}
	return issue, nil
}

// getIssue handles GET /admin/issues/:id: the issue with its events.
func (a *Admin) getIssue(c echo.Context) error {
	issue, err := a.issueOf(c)
	if err != nil {
		return err
	}
	if issue.Events == nil {
		issue.Events = []string{}
	}
	return c.JSON(http.StatusOK, issue)
}

// resolveInput is POST /admin/issues/:id/resolve's JSON body.
type resolveInput struct {
	// Replay replays the affected events that are not done.
	Replay bool `json:"replay"`
	// DryRun only lists them: nothing is replayed or resolved.
	DryRun bool `json:"dry_run"`
	// By and Reason are recorded on the issue and on each replayed run.
	// By defaults to "admin".
	By     string `json:"by"`
	Reason string `json:"reason"`
}

// ResolveJSON is POST /admin/issues/:id/resolve's answer.
type ResolveJSON struct {
	DryRun bool         `json:"dry_run"`
	Issue  dedupe.Issue `json:"issue"`
	// Events are the affected events not done (their latest run to the
	// issue's destination): what a replay replays.
	Events []dedupe.IssueEvent `json:"events"`
	// Replayed is what the replay did per event (a replay only).
	Replayed []jobs.ReplayResult `json:"replayed,omitempty"`
	// Failed counts events whose replay returned an error.
	Failed int `json:"failed,omitempty"`
}

// resolveIssue handles POST /admin/issues/:id/resolve (resolve).
func (a *Admin) resolveIssue(c echo.Context) error {
	id, err := issueID(c)
	if err != nil {
		return err
	}
	var in resolveInput
	if err := bindInput(c, &in, func(b *echo.ValueBinder) {
		b.Bool("replay", &in.Replay).Bool("dry_run", &in.DryRun).String("by", &in.By).String("reason", &in.Reason)
	}); err != nil {
		return bindError("resolve", err)
	}
	out, err := a.resolve(c.Request().Context(), a.requestLog(c), id, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// resolve checks in at the edge and resolves issue id: with DryRun it
// only lists the affected events not done; otherwise it replays exactly
// those (with Replay) to the issue's destination and marks the issue
// resolved, recording who and why (an issue resolved before keeps its
// first resolution). Its errors are echo errors with their status.
func (a *Admin) resolve(ctx context.Context, log *slog.Logger, id int64, in resolveInput) (ResolveJSON, error) {
	if in.By == "" {
		in.By = "admin"
	}
	if err := checkText(textInput{"by", in.By, maxNoteBytes}, textInput{"reason", in.Reason, maxNoteBytes}); err != nil {
		return ResolveJSON{}, httpError(err)
	}
	log = log.With(slog.Int64("issue", id), slog.String("by", in.By), slog.String("reason", in.Reason))
	issue, events, err := a.cfg.Issues.IssueEventsNotDone(ctx, id)
	if errors.Is(err, dedupe.ErrNotFound) {
		return ResolveJSON{}, echo.NewHTTPError(http.StatusNotFound, "issue not found")
	}
	if err != nil {
		return ResolveJSON{}, httpError(err)
	}
	out := ResolveJSON{DryRun: in.DryRun, Issue: issue, Events: events}
	if out.Events == nil {
		out.Events = []dedupe.IssueEvent{}
	}
	if in.DryRun {
		log.InfoContext(ctx, "issue resolve (dry run)", slog.Int("not_done", len(events)))
		return out, nil
	}
	if in.Replay {
		for _, ev := range events {
			res, err := a.replay(ctx, log, jobs.ReplayRequest{
				Source: issue.Source, EventID: ev.ExternalID, Destination: issue.Destination, By: in.By, Reason: in.Reason,
			})
			if err != nil {
				out.Failed++
				log.WarnContext(ctx, "issue resolve: an event's replay failed", slog.String("event_id", ev.ExternalID), slog.String("error", err.Error()))
			}
			out.Replayed = append(out.Replayed, res)
		}
	}
	resolved, err := a.cfg.Issues.ResolveIssue(ctx, id, in.By, in.Reason)
	switch {
	case errors.Is(err, dedupe.ErrIssueEnded):
		// Resolved before: its first resolution stands.
	case err != nil:
		return ResolveJSON{}, httpError(err)
	}
	out.Issue = resolved
	log.InfoContext(ctx, "issue resolved", slog.Bool("replay", in.Replay), slog.Int("not_done", len(events)),
		slog.Int("failed", out.Failed), slog.String("state", resolved.State))
	return out, nil
}

// issuesPage is the page of issues.
type issuesPage struct {
	viewer
	Issues []dedupe.Issue
	State  string
}

// browseIssues handles GET /admin/view/issues[?state=…].
func (a *Admin) browseIssues(c echo.Context) error {
	issues, state, err := a.issuesAsked(c)
	if err != nil {
		return err
	}
	return a.render(c, http.StatusOK, "issues", &issuesPage{Issues: issues, State: state})
}

// issuesAsked lists the issues in the state ?state= names (every state
// when empty), for the API and the page alike.
func (a *Admin) issuesAsked(c echo.Context) ([]dedupe.Issue, string, error) {
	state := c.QueryParam("state")
	switch state {
	case "", dedupe.IssueOpen, dedupe.IssueClosed, dedupe.IssueResolved:
	default:
		return nil, "", echo.NewHTTPError(http.StatusBadRequest, "state must be open, closed or resolved")
	}
	issues, err := a.cfg.Issues.ListIssues(c.Request().Context(), dedupe.IssueFilter{State: state})
	if err != nil {
		return nil, "", httpError(err)
	}
	return issues, state, nil
}

// issuePage is one issue's page, with a resolve's result when one was
// asked for.
type issuePage struct {
	viewer
	Issue    dedupe.Issue
	Resolved *ResolveJSON
}

// browseIssue handles GET /admin/view/issues/:id.
func (a *Admin) browseIssue(c echo.Context) error {
	issue, err := a.issueOf(c)
	if err != nil {
		return err
	}
	return a.render(c, http.StatusOK, "issue", &issuePage{Issue: issue})
}

// browseResolve handles the issue page's resolve form, POST
// /admin/view/issues/:id/resolve (replay, dry_run and reason), and shows
// the page with what it did.
func (a *Admin) browseResolve(c echo.Context) error {
	id, err := issueID(c)
	if err != nil {
		return err
	}
	r := c.Request()
	if err := parseForm(r); err != nil {
		return err
	}
	in := resolveInput{Replay: r.PostForm.Get("replay") != "", DryRun: r.PostForm.Get("dry_run") != "",
		By: r.PostForm.Get("by"), Reason: r.PostForm.Get("reason")}
	out, err := a.resolve(r.Context(), a.requestLog(c), id, in)
	if err != nil {
		return err
	}
	issue, err := a.cfg.Issues.GetIssue(r.Context(), id)
	if err != nil {
		return httpError(err)
	}
	return a.render(c, http.StatusOK, "issue", &issuePage{Issue: issue, Resolved: &out})
}
