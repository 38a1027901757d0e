// Package dedupe is webhookd's Postgres layer: it records each event once,
// claims job keys before a destination is called, and recovers runs whose
// worker died. It imports neither the gateway nor the queue.
//
// # Events
//
// An event is keyed by (source, external_id). [RecordBatch] inserts many
// events in one INSERT … ON CONFLICT statement; a repeat delivery only
// increments the row's delivery count. [Batcher] groups concurrent callers
// into such statements (group commit) and answers each caller once its
// statement has committed. The same statement puts each new event in the
// relay's outbox (table event_outbox), where it stays until its jobs are
// handed to the queue; [Store.RelayPending] is the relay's outbox scan.
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
//	    sweeper: lease passed│(attempts + 1)
//	                       running
//
//	running ── older version than one already forwarded ──► skipped_stale
//
// [Store.Claim] is one atomic statement: it creates the row as running, or
// takes a failed (retryable) row, or a row whose destination hold has
// passed, back to running. Any other existing row is reported as it is: done
// with its stored result, running elsewhere (retry later), or finished.
// [Store.Finish] is conditional on the call number the claim returned, so a
// worker that outlived its lease cannot overwrite the run the sweeper handed
// to another worker. A hold (429, or 503 with Retry-After) keeps the run
// running with held_until set and does not count as an attempt.
//
// [Store.SweepExpired] turns running rows whose lease has passed into
// failed with attempts + 1 (dead once attempts reach max_attempts), in
// bounded batches, under an advisory lock so one replica sweeps at a time.
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
// than one successful call in delivery_attempts.
package dedupe
