// Package jobs moves recorded events to their destinations through Asynq.
//
// One task per (event, destination), type [TypeDeliver], whose Asynq task
// id is the job key, so enqueuing twice is harmless ([Enqueuer] treats
// asynq.ErrTaskIDConflict as "already queued"). The [Handler] claims the
// key in Postgres (package dedupe) before anything else, calls the
// destination with the key as its Idempotency-Key, and stores the outcome.
// The [Relay] hands committed events to the queue off the request path, in
// batches written with one Redis script call each
// ([Enqueuer.EnqueueEvents], which writes Asynq's own task records), and
// re-finds any whose hand-off never happened; the [Sweeper] recovers runs
// whose worker died.
//
// Asynq's own retry budget is not used to count attempts: tasks are
// enqueued with a retry limit far above any max_attempts, and the handler
// decides dead from job_runs.attempts, so a rate-limit hold never spends
// an attempt (Asynq v0.26 archives a task whose retry count reached
// MaxRetry before it consults IsFailure).
package jobs
