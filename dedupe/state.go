package dedupe

// Event states, as reported for an event as a whole.
const (
	// StateReceived: recorded, hand-off to the queue not yet confirmed.
	StateReceived = "received"
	// StateQueued: in the queue, no run started for some destination.
	StateQueued = "queued"
	// StateRecordedOnly: imported as delivered elsewhere (webhookd import
	// --record-only), with no runs: nothing forwards it unless an operator
	// replays it.
	StateRecordedOnly = "recorded_only"
)

// latestRunStatusesSQL is an SQL expression: the status of the latest run
// (highest generation) of each destination of the event named by the two
// column expressions, as an array ('{}' without runs). With the
// destination count and the recorded-only mark it is the input of
// webhookd_event_state (migrations 0008 and 0017), the one rule for an
// event's state: recorded_only for an event imported as delivered
// elsewhere that has no run; received while its hand-off is pending and
// it has no run; then the most pressing status (dead, failed, running);
// queued while a destination has no run (never for a recorded-only event:
// nothing will queue it); else done, or skipped_stale when every run was
// skipped.
func latestRunStatusesSQL(source, externalID string) string {
	return `COALESCE((SELECT array_agg(l.status ORDER BY l.destination) FROM (
        SELECT DISTINCT ON (lr.destination) lr.destination, lr.status
        FROM job_runs lr
        WHERE lr.source = ` + source + ` AND lr.external_id = ` + externalID + `
        ORDER BY lr.destination, lr.generation DESC) l), '{}')`
}

// DestinationFilter is a destination that filters the events of its
// source by type: it makes no run for an event whose type matches none of
// Like (SQL LIKE patterns, as internal/glob writes them), nor for an
// event without a type, and such an event's state does not count it.
type DestinationFilter struct {
	Source, Destination string
	// Like are the filter's patterns as SQL LIKE patterns (escape \).
	Like []string
}

// filterRows returns filters as three columns, one row per pattern.
func filterRows(filters []DestinationFilter) (sources, dests, patterns []string) {
	for _, f := range filters {
		for _, p := range f.Like {
			sources, dests, patterns = append(sources, f.Source), append(dests, f.Destination), append(patterns, p)
		}
	}
	return sources, dests, patterns
}

// unwantedSQL is an SQL expression: how many destinations of the CTE
// filters(source, destination, pattern) do not want the event named by
// the two column expressions, by its type (a NULL type is wanted by
// none). The configured count less this is what webhookd_event_state
// takes for an event.
func unwantedSQL(source, externalID string) string {
	return `(SELECT count(*)::int FROM (
        SELECT 1 FROM filters f
        WHERE f.source = ` + source + `
        GROUP BY f.destination
        HAVING NOT COALESCE(bool_or((SELECT ev.event_type FROM events ev
                                     WHERE ev.source = ` + source + ` AND ev.external_id = ` + externalID + `) LIKE f.pattern), false)) u)`
}
