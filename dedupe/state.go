package dedupe

// Event states, as reported for an event as a whole.
const (
	// StateReceived: recorded, hand-off to the queue not yet confirmed.
	StateReceived = "received"
	// StateQueued: in the queue, no run started for some destination.
	StateQueued = "queued"
)

// EventState summarises an event from its runs: received while the
// hand-off is pending; then the most pressing run status (dead, failed,
// running); queued while some destination has no run yet; else done (or
// skipped_stale when every run was skipped).
func EventState(pending bool, runStatuses []string, destinations int) string {
	if pending && len(runStatuses) == 0 {
		return StateReceived
	}
	var dead, failed, running, skipped bool
	for _, s := range runStatuses {
		switch s {
		case StatusDead:
			dead = true
		case StatusFailed:
			failed = true
		case StatusRunning:
			running = true
		case StatusSkippedStale:
			skipped = true
		}
	}
	switch {
	case dead:
		return StatusDead
	case failed:
		return StatusFailed
	case running:
		return StatusRunning
	case len(runStatuses) < destinations || len(runStatuses) == 0:
		return StateQueued
	case skipped && !containsDone(runStatuses):
		return StatusSkippedStale
	}
	return StatusDone
}

func containsDone(statuses []string) bool {
	for _, s := range statuses {
		if s == StatusDone {
			return true
		}
	}
	return false
}
