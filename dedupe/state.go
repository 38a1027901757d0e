package dedupe

import "time"

// Event states, as reported for an event as a whole.
const (
	// StateReceived: recorded, hand-off to the queue not yet confirmed.
	StateReceived = "received"
	// StateQueued: planned for a destination that has not started it.
	StateQueued = "queued"
	// StateRecordedOnly: imported as delivered elsewhere (webhookd import
	// --record-only), with no runs: nothing forwards it unless an operator
	// replays it.
	StateRecordedOnly = "recorded_only"
)

// Shown statuses of a run, besides the stored ones (done, failed, dead,
// skipped_stale, filtered, running): what will happen next.
const (
	// ShownQueued: planned or replayed, not started.
	ShownQueued = "queued"
	// ShownRetrying: the last try failed; the next is due at RetryAt.
	ShownRetrying = "retrying"
	// ShownHeld: waiting on the destination (HoldReason) until HoldUntil;
	// no attempt spent.
	ShownHeld = "held"
)

// The one rule for what a run and an event are shown as, everywhere
// (API, page, CLI, metrics):
//
//   - A run's shown status is webhookd_run_status (migration 0022) of
//     what is stored: running with held_until set is held (hold_reason
//     says why: the destination asked to wait, or the entity's order);
//     failed, not permanent, with no failed attempt in its budget is
//     queued (a replay waiting for a worker); failed, not permanent, is
//     retrying; any other status is itself. A run whose destination the
//     operator paused, or whose circuit is open, is held too while it
//     would otherwise be queued or retrying, and so is one whose
//     destination is no longer configured (DestinationView, passed by
//     the caller that knows the destinations' states).
//   - An event's state is webhookd_event_state over the shown statuses
//     of its latest runs (highest generation per destination) and a
//     queued (or held) one for each destination of its plan without a
//     run: failed or dead first, then retrying, held, running, queued;
//     then received while it has no run and its hand-off is pending (an
//     event recorded before plans were kept, or without a plan);
//     recorded_only for an import recorded as delivered elsewhere with no
//     run; else done (skipped_stale when every run was skipped).
//
// The plan is events.plan, kept when the event was recorded; a NULL plan
// (recorded before plans were kept) is the destinations its runs name.

// DestinationView is what the running configuration says of the
// destinations, for the shown statuses: whose calls wait (Held), and,
// when Configured is not nil, which destinations exist now. A planned
// run of a destination not configured (removed by a reload) that would
// be queued or retrying is shown held (HoldNotConfigured): nothing will
// call it unless it is configured again.
type DestinationView struct {
	Held       []HeldDestination
	Configured []Route
}

// Route is one configured destination of a source.
type Route struct {
	Source, Destination string
}

// HoldNotConfigured is the hold reason of a run whose destination is not
// in the configuration.
const HoldNotConfigured = "destination not configured"

// HeldDestination is a destination whose calls wait whatever a run
// says: paused by an operator, or its circuit open.
type HeldDestination struct {
	Source, Destination string
	// Reason is "paused" or "circuit open".
	Reason string
	// Until is when the hold ends by itself (the circuit's cooldown), or
	// zero (paused: until resumed).
	Until time.Time
}

// heldColumns returns held as four columns for unnest.
func heldColumns(held []HeldDestination) (sources, dests, reasons []string, until []*time.Time) {
	for _, h := range held {
		sources, dests, reasons = append(sources, h.Source), append(dests, h.Destination), append(reasons, h.Reason)
		var u *time.Time
		if !h.Until.IsZero() {
			t := h.Until
			u = &t
		}
		until = append(until, u)
	}
	return sources, dests, reasons, until
}

// viewCTEs are the CTEs "held(source, destination, reason, until)" and
// "configured(source, destination)" of view, with q's arguments, and
// "checked(yes)": whether configured is to be checked at all.
func (q *eventQuery) viewCTEs() string {
	hs, hd, hr, hu := heldColumns(q.view.Held)
	var cs, cd []string
	for _, r := range q.view.Configured {
		cs, cd = append(cs, r.Source), append(cd, r.Destination)
	}
	return `held AS (SELECT * FROM unnest(` + q.arg(hs) + `::text[], ` + q.arg(hd) + `::text[], ` + q.arg(hr) + `::text[], ` + q.arg(hu) + `::timestamptz[])
        AS h(source, destination, reason, until)),
     configured AS (SELECT * FROM unnest(` + q.arg(cs) + `::text[], ` + q.arg(cd) + `::text[]) AS c(source, destination)),
     checked AS (SELECT ` + q.arg(q.view.Configured != nil) + `::boolean AS yes)`
}

// shownRunsSQL is a query of (destination, shown, started): the shown status of
// the latest run of each destination of the event (source, externalID,
// plan: SQL expressions), and 'queued' for each destination of its plan
// without a run. With held true, the CTEs of viewCTEs hold the runs that
// would be queued or retrying: of a held destination, or of one not
// configured.
func shownRunsSQL(source, externalID, plan string, held bool) string {
	shown := "s.shown"
	join := ""
	if held {
		shown = `CASE WHEN s.shown IN ('queued', 'retrying') AND (h.destination IS NOT NULL OR
            ((SELECT yes FROM checked) AND NOT EXISTS (SELECT 1 FROM configured c WHERE c.source = ` + source + ` AND c.destination = s.destination)))
            THEN 'held' ELSE s.shown END`
		join = " LEFT JOIN held h ON h.source = " + source + " AND h.destination = s.destination"
	}
	// Each part is looked up per event through job_runs_event_idx: OFFSET
	// 0 keeps the planner from flattening them into a join that, with a
	// page of many events, reads all of job_runs.
	return `SELECT s.destination, ` + shown + ` AS shown, s.started FROM (
        (SELECT DISTINCT ON (lr.destination) lr.destination,
                webhookd_run_status(lr.status, lr.permanent, lr.attempts, lr.held_until) AS shown, true AS started
         FROM job_runs lr
         WHERE lr.source = ` + source + ` AND lr.external_id = ` + externalID + `
         ORDER BY lr.destination, lr.generation DESC OFFSET 0)
        UNION ALL
        SELECT p.d, 'queued', false FROM unnest(` + plan + `) AS p(d)
        WHERE p.d <> ALL (ARRAY(SELECT pr.destination FROM job_runs pr
                                WHERE pr.source = ` + source + ` AND pr.external_id = ` + externalID + `))
    ) s` + join
}

// eventStateSQL is an SQL expression: the state of the event (source,
// externalID, plan, recordedOnly: SQL expressions) whose hand-off is
// done when handedOff (an SQL expression) holds, without the
// destinations' holds (the admin listing adds them, withStateSQL).
func eventStateSQL(source, externalID, plan, recordedOnly, handedOff string) string {
	return `(SELECT webhookd_event_state(` + handedOff + `, ` + recordedOnly + `, ` + shownAggregates + `)
        FROM (` + shownRunsSQL(source, externalID, plan, false) + `) sr)`
}

// shownAggregates are the last two arguments of webhookd_event_state
// over the rows sr of shownRunsSQL: whether the event has runs, and their
// shown statuses (by destination).
const shownAggregates = `COALESCE(bool_or(sr.started), false), COALESCE(array_agg(sr.shown ORDER BY sr.destination), '{}')`
