// Package dedupe is webhookd's Postgres layer: it records each event once,
// claims job keys before a destination is called, and recovers runs whose
// worker died. It imports neither the gateway nor the queue.
//
// # Events
//
// An event is keyed by (source, external_id). [RecordBatch] inserts many
// events in one INSERT … ON CONFLICT DO NOTHING statement, which never
// writes an existing event: a repeat delivery is counted, in the same
// statement, in the event's narrow row of event_repeats, and the view
// event_deliveries adds it to the copies of the first delivery
// (repeats.go). [Batcher] groups concurrent callers
// into such statements (group commit) and answers each caller once its
// statement has committed. The same statement puts each new event in the
// relay's outbox (table event_outbox, outbox.go), where it stays until
// every destination of the event has a run: while it is there, Postgres
// is what vouches for the event's tasks, whatever Redis kept.
//
// # Job runs
//
// A job key is <source>:<destination>:<external_id>, with #<generation>
// appended for a forced replay. Its job_runs row moves through these states:
//
//	            claim                 2xx
//	(none) ───────────────► running ───────► done
//	                         │  ▲ │ 4xx
//	     5xx, timeout, crash │  │ └────────► failed (permanent; replay only)
//	                         ▼  │ claim
//	                        failed ──── attempts reach max_attempts ──► dead
//	                         ▲
//	      sweep: lease passed│(attempts + 1)
//	                       running
//
//	running ── older version than one already forwarded ──► skipped_stale
//
// [Store.Claim] is one atomic statement: it creates the row as running, or
// takes a failed (retryable) row, or a row whose destination hold has
// passed, back to running; the run's calls numbers the call about to be
// made. Any other existing row is reported as it is: done with its stored
// result, running elsewhere (retry later), or finished. [Store.Finish] is
// conditional on the call number the claim returned, so a worker that
// outlived its lease cannot overwrite the run the sweep handed to another
// worker; it writes the call's delivery_attempts row either way (one row
// per call, written once its outcome is known). What each outcome (done, retry, permanent, hold, stale) does to
// the run is written once, in finishSQL. A hold (429, or 503 with
// Retry-After) keeps the run running with held_until set and does not
// count as an attempt.
//
// retry_at is set while a run waits for a try (a retryable failure, a
// hold, a replay) and cleared by the claim that takes it.
//
// # Recovery
//
// Recovery is driven by what this package records (recovery.go): a run
// that is running may have lost its worker ([Store.SweepExpired] turns it
// into failed with attempts + 1, or dead, once its lease passes, and logs
// its call as 'unknown': the destination may have acted on it); a run whose
// retry_at has passed should have been claimed ([Store.DueRuns]); an event
// in the outbox has destinations no worker claimed yet
// ([Store.OutboxPage], [Store.UnsettledEvents]; [Store.SettleEvents] takes it out once every
// destination has a run). The reconciler in package jobs reads these, one
// process at a time ([Store.WithRecoveryLock]), and makes sure each has a
// live task in Redis. Every step is a single statement, so a process may
// die between any two.
//
// # The event feed
//
// [Store.ReadFeed] hands out recorded events from a cursor, in a stable
// order that never skips one committed late (feed.go): an event's
// position is the id of the transaction that inserted it and a tie-break,
// set by column defaults at insert, and a read hands out only events
// whose transaction is older than the oldest one still running. The
// admin event stream and `webhookd listen` follow it.
//
// # Ordering, retention, the duplicate check
//
// [Store.AdvanceVersion] decides in one upsert on entity_versions whether
// an ordered event may be forwarded: stale when a newer version was
// recorded, busy while another key of the entity is in flight (its hold
// ends with [Store.ReleaseVersion] or after the lease), else fresh.
// [Store.RunRetention] deletes old rows in bounded batches under a session
// advisory lock and records each run in maintenance_runs
// ([Store.LastMaintenance]); [Store.DuplicateKeys] lists keys with more
// than one successful call in delivery_attempts, and [Store.UnknownCalls]
// the calls of unknown outcome: possible duplicates that no stored
// outcome shows.
//
// # Issues
//
// An issue groups a destination's failures by cause (issues.go): one open
// row per (source, destination, cause) under a partial unique index, so
// [Store.RecordIssueFailure], one upsert per batch of a worker's gathered
// failures, adds to the open issue whatever the number of workers, lists
// the events (issue_events, bounded) and
// breaks the destination's run of successes; [Store.RecordIssueSuccess]
// closes the destination's open issues at close_after successes in a
// row. [Store.ClaimIssueNotices] hands each message about an issue
// (opened, closed, reminder) to one process by a conditional UPDATE …
// RETURNING. [Store.IssueEventsNotDone] lists what resolving replays and
// [Store.ResolveIssue] records who resolved it and why.
package dedupe
