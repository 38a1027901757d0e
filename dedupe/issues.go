package dedupe

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Issue states (issues.state).
const (
	// IssueOpen: the destination still fails, or has not yet succeeded
	// close_after times in a row.
	IssueOpen = "open"
	// IssueClosed: the destination succeeded close_after times in a row.
	IssueClosed = "closed"
	// IssueResolved: an operator resolved it (with who and why).
	IssueResolved = "resolved"
)

// MaxIssueEvents bounds the events kept per issue: past it the issue still
// counts failures but lists no more events (Issue.EventsCapped).
const MaxIssueEvents = 10_000

// Issue is a destination's failures of one cause, grouped (the issues
// table; migration 0027).
type Issue struct {
	ID          int64  `json:"id"`
	Source      string `json:"source"`
	Destination string `json:"destination"`
	// Cause is the answer's status code ("500"), "timeout",
	// "connection", "rule" or "circuit open".
	Cause string `json:"cause"`
	// State is IssueOpen, IssueClosed or IssueResolved.
	State string `json:"state"`
	// Count is the failed outcomes counted.
	Count     int64     `json:"count"`
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
	// EndedAt is when it closed or was resolved.
	EndedAt *time.Time `json:"ended_at,omitempty"`
	// ResolvedBy and ResolveReason say who resolved it and why.
	ResolvedBy    string `json:"resolved_by,omitempty"`
	ResolveReason string `json:"resolve_reason,omitempty"`
	// EventCount is how many distinct events it lists (at most
	// MaxIssueEvents).
	EventCount int `json:"event_count"`
	// Events are the affected events' ids, oldest first (the detail
	// only).
	Events []string `json:"events,omitempty"`
}

// IssueFailure is failed outcomes of one cause to count
// (RecordIssueFailure): a worker gathers them and writes them together.
type IssueFailure struct {
	Source, Destination, Cause string
	// ExternalIDs are the events affected.
	ExternalIDs []string
	// Count is the failed outcomes counted; 0 counts one per event.
	Count int
}

// IssueRecorded is what RecordIssueFailure did.
type IssueRecorded struct {
	// ID is the issue's id.
	ID int64
	// Opened is true when these failures opened the issue.
	Opened bool
}

const recordIssueFailureSQL = `
WITH issue AS (
    INSERT INTO issues (source, destination, cause, count) VALUES ($1, $2, $3, $6)
    ON CONFLICT (source, destination, cause) WHERE state = 'open'
    DO UPDATE SET count = issues.count + EXCLUDED.count, last_seen = now(), successes = 0
    RETURNING id, count, (xmax = 0) AS opened
), others AS (
    UPDATE issues SET successes = 0
    WHERE source = $1 AND destination = $2 AND state = 'open' AND cause <> $3 AND successes > 0
), affected AS (
    INSERT INTO issue_events (issue_id, external_id)
    SELECT issue.id, x.id FROM issue, unnest($4::text[]) AS x(id)
    -- No more events listed than failures counted: the listed events are
    -- counted only once the failures pass the bound.
    LIMIT (SELECT CASE WHEN count <= $5 THEN $5
                       ELSE $5 - (SELECT count(*) FROM (SELECT 1 FROM issue_events e WHERE e.issue_id = issue.id LIMIT $5) kept)
                  END FROM issue)
    ON CONFLICT DO NOTHING
)
SELECT id, opened FROM issue`

// RecordIssueFailure counts failed outcomes of one cause in one
// statement: it opens the issue of (source, destination, cause) or adds to
// the open one (the partial unique index makes concurrent workers share
// one row), lists the events among its affected ones (up to
// MaxIssueEvents), and breaks the success run of the destination's other
// open issues. Two failures of
// different causes just after a recovery lock each other's issue (the
// success runs they break) and may deadlock; the one Postgres rolls back
// is tried again, so no failure goes uncounted.
func (s *Store) RecordIssueFailure(ctx context.Context, f IssueFailure) (IssueRecorded, error) {
	count := f.Count
	if count <= 0 {
		count = max(len(f.ExternalIDs), 1)
	}
	var (
		r   IssueRecorded
		err error
	)
	for range 3 {
		err = s.pool.QueryRow(ctx, recordIssueFailureSQL, f.Source, f.Destination, f.Cause, f.ExternalIDs, MaxIssueEvents, count).Scan(&r.ID, &r.Opened)
		if !isTransient(err) {
			break
		}
	}
	if err != nil {
		return r, fmt.Errorf("error recording issue failure: %w", err)
	}
	return r, nil
}

const recordIssueSuccessSQL = `
UPDATE issues SET successes = successes + 1,
    state = CASE WHEN successes + 1 >= $3 THEN 'closed' ELSE state END,
    ended_at = CASE WHEN successes + 1 >= $3 THEN now() END
WHERE source = $1 AND destination = $2 AND state = 'open'
RETURNING id, state`

// IssueSuccess is what RecordIssueSuccess did.
type IssueSuccess struct {
	// Open is false when the destination has no open issue any more.
	Open bool
	// Closed are the issues this success closed.
	Closed []int64
}

// RecordIssueSuccess counts a successful call to the destination against
// its open issues, closing those that reached closeAfter successes in a
// row. Callers run it only while they believe an issue is open
// (OpenIssueDestinations).
func (s *Store) RecordIssueSuccess(ctx context.Context, source, destination string, closeAfter int) (IssueSuccess, error) {
	rows, err := s.pool.Query(ctx, recordIssueSuccessSQL, source, destination, closeAfter)
	if err != nil {
		return IssueSuccess{}, fmt.Errorf("error recording issue success: %w", err)
	}
	var out IssueSuccess
	for rows.Next() {
		var id int64
		var state string
		if err := rows.Scan(&id, &state); err != nil {
			return out, fmt.Errorf("error recording issue success: %w", err)
		}
		if state == IssueClosed {
			out.Closed = append(out.Closed, id)
		} else {
			out.Open = true
		}
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("error recording issue success: %w", err)
	}
	return out, nil
}

// IssueDestination names a destination of a source.
type IssueDestination struct{ Source, Destination string }

// OpenIssueDestinations returns the destinations with an open issue.
func (s *Store) OpenIssueDestinations(ctx context.Context) ([]IssueDestination, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT source, destination FROM issues WHERE state = 'open'`)
	if err != nil {
		return nil, fmt.Errorf("error listing open issues: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (IssueDestination, error) {
		var d IssueDestination
		return d, r.Scan(&d.Source, &d.Destination)
	})
	if err != nil {
		return nil, fmt.Errorf("error listing open issues: %w", err)
	}
	return out, nil
}

// issueColumns are the columns scanIssue reads, the count of listed
// events included.
const issueColumns = `id, source, destination, cause, state, count, first_seen, last_seen, ended_at,
    COALESCE(resolved_by, ''), COALESCE(resolve_reason, ''),
    (SELECT count(*) FROM issue_events e WHERE e.issue_id = issues.id)`

// scanIssue reads a row of issueColumns.
func scanIssue(row pgx.Row) (Issue, error) {
	var i Issue
	err := row.Scan(&i.ID, &i.Source, &i.Destination, &i.Cause, &i.State, &i.Count, &i.FirstSeen, &i.LastSeen, &i.EndedAt,
		&i.ResolvedBy, &i.ResolveReason, &i.EventCount)
	return i, err
}

// IssueFilter selects issues for ListIssues.
type IssueFilter struct {
	// State, when set, keeps issues in that state.
	State string
	// Limit caps the issues returned, newest last_seen first. Defaults
	// to 100.
	Limit int
}

// ListIssues returns the issues f selects, the most recently seen first,
// without their events.
func (s *Store) ListIssues(ctx context.Context, f IssueFilter) ([]Issue, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	rows, err := s.pool.Query(ctx, `SELECT `+issueColumns+` FROM issues
WHERE ($1 = '' OR state = $1) ORDER BY last_seen DESC, id DESC LIMIT $2`, f.State, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("error listing issues: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Issue, error) { return scanIssue(r) })
	if err != nil {
		return nil, fmt.Errorf("error listing issues: %w", err)
	}
	return out, nil
}

// GetIssue returns issue id with its events. It returns ErrNotFound for
// an unknown id.
func (s *Store) GetIssue(ctx context.Context, id int64) (Issue, error) {
	i, err := scanIssue(s.pool.QueryRow(ctx, `SELECT `+issueColumns+` FROM issues WHERE id = $1`, id))
	if err != nil {
		return i, fmt.Errorf("error reading issue %d: %w", id, translate(err))
	}
	rows, err := s.pool.Query(ctx, `SELECT external_id FROM issue_events WHERE issue_id = $1 ORDER BY first_seen, external_id`, id)
	if err != nil {
		return i, fmt.Errorf("error reading issue %d events: %w", id, err)
	}
	if i.Events, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return i, fmt.Errorf("error reading issue %d events: %w", id, err)
	}
	return i, nil
}

// IssueEvent is an affected event with the state of its latest run to the
// issue's destination ("" when it has none).
type IssueEvent struct {
	ExternalID string `json:"event_id"`
	RunStatus  string `json:"run_status,omitempty"`
}

// IssueEventsNotDone returns the issue's affected events whose latest run
// to the issue's destination is not done (still failing, dead, or never
// run), oldest first: what a resolve replays. It returns ErrNotFound for
// an unknown issue.
func (s *Store) IssueEventsNotDone(ctx context.Context, id int64) (Issue, []IssueEvent, error) {
	i, err := s.GetIssue(ctx, id)
	if err != nil {
		return i, nil, err
	}
	rows, err := s.pool.Query(ctx, `
SELECT e.external_id, COALESCE(r.status, '')
FROM issue_events e
LEFT JOIN LATERAL (
    SELECT status FROM job_runs
    WHERE source = $2 AND external_id = e.external_id AND destination = $3
    ORDER BY generation DESC LIMIT 1
) r ON true
WHERE e.issue_id = $1 AND r.status IS DISTINCT FROM 'done'
ORDER BY e.first_seen, e.external_id`, id, i.Source, i.Destination)
	if err != nil {
		return i, nil, fmt.Errorf("error reading issue %d events: %w", id, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (IssueEvent, error) {
		var e IssueEvent
		return e, r.Scan(&e.ExternalID, &e.RunStatus)
	})
	if err != nil {
		return i, nil, fmt.Errorf("error reading issue %d events: %w", id, err)
	}
	return i, out, nil
}

// ErrIssueEnded is returned by ResolveIssue for an issue already
// resolved.
var ErrIssueEnded = errors.New("issue is already resolved")

// ResolveIssue marks an open or closed issue resolved by an operator,
// recording by and reason (an issue that closed by itself may still need
// its events replayed). It returns ErrNotFound for an unknown issue and
// ErrIssueEnded for one already resolved.
func (s *Store) ResolveIssue(ctx context.Context, id int64, by, reason string) (Issue, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE issues SET state = 'resolved', ended_at = COALESCE(ended_at, now()), resolved_by = $2, resolve_reason = $3
WHERE id = $1 AND state <> 'resolved'`, id, by, reason)
	if err != nil {
		return Issue{}, fmt.Errorf("error resolving issue %d: %w", id, err)
	}
	i, err := s.GetIssue(ctx, id)
	if err == nil && tag.RowsAffected() == 0 {
		err = ErrIssueEnded
	}
	return i, err
}

// Issue notices, claimed once each (ClaimIssueNotices).
const (
	// NoticeOpened: the issue opened.
	NoticeOpened = "issue.opened"
	// NoticeClosed: the issue closed or was resolved.
	NoticeClosed = "issue.closed"
	// NoticeReminder: the issue is still open a renotify period after
	// the last message.
	NoticeReminder = "issue.reminder"
)

// IssueNotice is a message about an issue this process claimed to send.
type IssueNotice struct {
	// Type is NoticeOpened, NoticeClosed or NoticeReminder.
	Type  string
	Issue Issue
}

const claimIssueNoticesSQL = `
WITH opened AS (
    UPDATE issues SET notified_open_at = now(), reminded_at = now()
    WHERE id IN (SELECT id FROM issues WHERE notified_open_at IS NULL AND state = 'open' LIMIT $2 FOR UPDATE SKIP LOCKED)
    RETURNING 'issue.opened' AS type, id
), ended AS (
    UPDATE issues SET notified_close_at = now()
    WHERE id IN (SELECT id FROM issues WHERE notified_close_at IS NULL AND state <> 'open' AND notified_open_at IS NOT NULL
                 LIMIT $2 FOR UPDATE SKIP LOCKED)
    RETURNING 'issue.closed' AS type, id
), reminders AS (
    UPDATE issues SET reminded_at = now()
    WHERE id IN (SELECT id FROM issues WHERE state = 'open' AND notified_open_at IS NOT NULL AND reminded_at <= now() - make_interval(secs => $1::float8)
                 LIMIT $2 FOR UPDATE SKIP LOCKED)
    RETURNING 'issue.reminder' AS type, id
), claimed AS (
    SELECT * FROM opened UNION ALL SELECT * FROM ended UNION ALL SELECT * FROM reminders
)
SELECT claimed.type, ` + issueColumns + ` FROM claimed JOIN issues USING (id) ORDER BY issues.id`

// ClaimIssueNotices claims up to limit messages of each type to send: an
// issue opened and not yet announced, one ended (closed or resolved)
// whose opening was announced and whose end was not, and one still open
// whose last message is older than renotify. Each claim is a
// conditional UPDATE … RETURNING, so two processes never claim the same
// message. An issue that ended before its opening was announced is
// announced by neither message: nobody needs to hear of it now.
func (s *Store) ClaimIssueNotices(ctx context.Context, renotify time.Duration, limit int) ([]IssueNotice, error) {
	rows, err := s.pool.Query(ctx, claimIssueNoticesSQL, renotify.Seconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("error claiming issue notices: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (IssueNotice, error) {
		var n IssueNotice
		i := &n.Issue
		err := r.Scan(&n.Type, &i.ID, &i.Source, &i.Destination, &i.Cause, &i.State, &i.Count, &i.FirstSeen, &i.LastSeen, &i.EndedAt,
			&i.ResolvedBy, &i.ResolveReason, &i.EventCount)
		return n, err
	})
	if err != nil {
		return nil, fmt.Errorf("error claiming issue notices: %w", err)
	}
	return out, nil
}
