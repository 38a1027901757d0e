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
