// Package jobs moves recorded events to their destinations through Asynq.
//
// One task per (event, destination), type [TypeDeliver], whose Asynq task
// id is the job key, so enqueuing twice is harmless. The [Handler] claims
// the key in Postgres (package dedupe) before anything else, calls the
// destination with the key as its Idempotency-Key, and settles the
// outcome.
//
// # The hand-off
//
//	gateway ── record (events + event_outbox, one statement) ── 2xx to the sender
//	   │
//	   └─ Relay (fast path, in memory) ── EnqueueEvents ──► Redis (Asynq)
//	                                                          │
//	Reconciler (every process, one at a time):                ▼
//	   outbox event without a run for a destination ──► ensure its task ──► worker: claim (job_runs)
//	   run whose lease passed (sweep) ─────────────────► ensure its task        call, settle
//	   run whose retry_at passed ──────────────────────► ensure its task
//	   outbox event whose destinations all have runs ──► settled (row deleted)
//
// The [Relay] is only the fast path: it hands committed events to the
// queue off the request path, in batches written with one Redis script
// call each ([Enqueuer.EnqueueEvents], which writes Asynq's own task
// records; asynqformat.go). Correctness rests on the [Reconciler]: it
// reads what Postgres says is unsettled and makes sure a live task exists
// for each (ensureScript): a task Redis lost is written again, one a dead
// worker held as active is put back on the queue, an archived one is made
// pending again. Nothing depends on a marker or a
// lease kept in Redis, and no step depends on the process that started
// it finishing it: the claim in job_runs keeps any extra copy of a task
// from calling the destination twice.
//
// # Replay
//
// The [Replayer] (replay.go) is the one place that says what a replay
// does; the admin API and its pages call it (the CLI through the API),
// and only check the request at the edge and render the answer. Per
// destination of the event (every one whose filter wants the event's
// type, unless one is named): a done run answers with its stored result
// and calls nothing; a failed or dead run is reopened with the same key
// (attempts reset, calls still counted); a destination without a run
// gets its first one (dedupe's OpenFirstRun); a running or skipped_stale
// run is left alone. Only Force makes another key: dedupe records the
// next generation under a lock on the event, keyed by [Key] (<key>#N),
// with who asked and why, and it must name its destinations and a
// reason ([ErrBadReplay]). Every run a replay opens is due in Postgres
// before it is enqueued, so a lost enqueue ([ErrEnqueueFailed]) is
// written by the Reconciler. A bulk replay selects events as the admin
// listing does, newest first, at most its limit per call, and replays
// each as above.
//
// # Outcomes
//
// A destination's answer is classified (deliver.go) and settled
// (settle.go) per SPEC's table; dedupe's finishSQL is the one place that
// says what each outcome does to the run:
//
//	answer                                  outcome    run                       Asynq
//	2xx                                     done       done, result stored       dropped
//	429, or 503 with Retry-After            hold       running, held; no attempt retried after the wait
//	408, other 5xx, timeout, conn. error    retry      failed, attempts + 1      retried after backoff
//	3xx (never followed)                    retry      failed, attempts + 1      retried after backoff
//	  … attempts reach max_attempts         retry      dead                      archived
//	other 4xx                               permanent  failed, permanent         archived
//	(ordered) a newer version was sent      stale      skipped_stale; no call    dropped
//	(ordered) the entity is in flight       hold       running, held; no call    retried after the wait
//
// A redirect is never followed: the payload, its signature and its key go
// to the configured URL only. It is a failed attempt, not a permanent
// failure, so an endpoint that moved can be fixed in the configuration
// while the run still retries; its status and Location (credentials
// redacted) are the run's last error.
//
// Asynq's own retry budget is not used to count attempts: tasks are
// enqueued with a retry limit far above any max_attempts, and the handler
// decides dead from job_runs.attempts, so a rate-limit hold never spends
// an attempt (Asynq v0.26 archives a task whose retry count reached
// MaxRetry before it consults IsFailure).
package jobs
