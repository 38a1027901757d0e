// Package loadgen drives a webhookd gateway with signed webhooks and
// measures what issue 6 asks for: acknowledgements per second, ack latency
// (from an HDR histogram, measured from the intended send time in open
// loop so a slow server cannot hide its queueing), events per second
// reaching the destination, drain time, CPU per acknowledged event, peak
// RSS, and an exactly-once check at the end.
//
// Run prepares an environment (a fresh database, the bench queue's Redis
// keys deleted, an in-process sink as the destination), starts webhookd
// in this process as every deployment assembles it (webhookd.Start),
// optionally preloads events, sends for the configured duration, waits for
// the queue to drain, checks exactly-once and returns a Report.
//
// With Config.Naive the gateway is replaced by NaiveServer, the
// straightforward ingest (verify, one single-row INSERT … ON CONFLICT, one
// Asynq Enqueue with TaskID, answer) that the issue compares against; the
// worker side stays webhookd's. The naive ingest exists only here and in
// the webhookd-bench program, never in the product.
//
// Serve runs the same server on a given address with no generator inside,
// for an outside one (wrk with WriteRequests' presigned requests, as
// docs/ack-compare.sh does): the acks are counted from the database and
// "this process" CPU is the server's alone.
//
// The generator runs in the same process as an in-process server, so
// "process CPU" and peak RSS include the generator's own HTTP client and
// signing. Generator goroutines carry the pprof label role=loadgen, so a
// CPU profile can exclude them: go tool pprof -tagignore role=loadgen.
package loadgen
