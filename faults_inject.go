//go:build faultinject

package webhookd

import (
	"context"
	"log/slog"
	"os"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/dedupe"
)

// faultEnv names the fault to inject; only builds with the faultinject
// tag read it. Faults:
//
//	exit-after-commit  exit with status 3 right after an event's row has
//	                   committed, before the gateway answers or hands the
//	                   event to the queue
//	exit-before-claim  a worker exits with status 3 when it takes its
//	                   first task, before claiming the key (the task is
//	                   left active in Redis for a worker that is gone)
//	exit-after-call    a worker exits with status 3 when its first
//	                   destination call has succeeded, before storing the
//	                   outcome (the call is logged, its outcome unknown)
//	exit-on-lost-task  any process exits with status 3 the moment Redis
//	                   tells its recovery that a task was missing: after
//	                   the first script call that wrote lost tasks again,
//	                   before the rest of its pass
const faultEnv = "WEBHOOKD_FAULT"

// faultExitCode is the status a process stopped by an injected fault
// exits with.
const faultExitCode = 3

// withFaults wraps rec with the fault named by WEBHOOKD_FAULT, if any.
func withFaults(rec recorder, log *slog.Logger) recorder {
	switch os.Getenv(faultEnv) {
	case "exit-after-commit":
		log.Warn("FAULT INJECTION: exiting after the first committed event", slog.String("fault", "exit-after-commit"))
		return exitAfterCommit{rec: rec, log: log}
	}
	return rec
}

// exitAfterCommit kills the process the moment a new event is committed.
type exitAfterCommit struct {
	rec recorder
	log *slog.Logger
}

func (f exitAfterCommit) Record(ctx context.Context, ev dedupe.Event) (dedupe.Recorded, error) {
	r, err := f.rec.Record(ctx, ev)
	if err == nil && r.Inserted {
		f.log.WarnContext(ctx, "FAULT INJECTION: event committed; exiting before the answer and the hand-off",
			slog.String("source", ev.Source), slog.String("event_id", ev.ExternalID))
		os.Exit(faultExitCode)
	}
	return r, err
}

// withRunFaults wraps runs with the worker fault named by WEBHOOKD_FAULT,
// if any.
func withRunFaults(runs runStore, log *slog.Logger) runStore {
	switch fault := os.Getenv(faultEnv); fault {
	case "exit-before-claim", "exit-after-call":
		log.Warn("FAULT INJECTION: the worker exits at its first task", slog.String("fault", fault))
		return runFault{runStore: runs, fault: fault, log: log}
	}
	return runs
}

// runFault kills the worker process at the point its fault names.
type runFault struct {
	runStore
	fault string
	log   *slog.Logger
}

func (f runFault) Claim(ctx context.Context, req dedupe.ClaimRequest) (dedupe.Claim, error) {
	if f.fault == "exit-before-claim" {
		f.log.WarnContext(ctx, "FAULT INJECTION: task taken; exiting before the claim", slog.String("key", req.Key))
		os.Exit(faultExitCode)
	}
	return f.runStore.Claim(ctx, req)
}

func (f runFault) Finish(ctx context.Context, key string, fin dedupe.Finish) (dedupe.Finished, error) {
	if f.fault == "exit-after-call" && fin.Called && fin.Outcome == dedupe.OutcomeDone {
		f.log.WarnContext(ctx, "FAULT INJECTION: the destination answered 2xx; exiting before storing it", slog.String("key", key))
		os.Exit(faultExitCode)
	}
	return f.runStore.Finish(ctx, key, fin)
}

// withRedisFaults adds the Redis fault named by WEBHOOKD_FAULT to rdb, if
// any.
func withRedisFaults(rdb redis.UniversalClient, log *slog.Logger) {
	if os.Getenv(faultEnv) == "exit-on-lost-task" {
		log.Warn("FAULT INJECTION: exiting when recovery finds a lost task", slog.String("fault", "exit-on-lost-task"))
		rdb.AddHook(lostTaskFault{log: log})
	}
}

// lostTaskFault exits the process when a script's reply says it wrote a
// task that was missing (jobs' ensureScript answers "written").
type lostTaskFault struct{ log *slog.Logger }

func (f lostTaskFault) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f lostTaskFault) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		f.check(cmd)
		return err
	}
}

func (f lostTaskFault) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			f.check(cmd)
		}
		return err
	}
}

func (f lostTaskFault) check(cmd redis.Cmder) {
	c, ok := cmd.(*redis.Cmd)
	if !ok || c.Err() != nil {
		return
	}
	if actions, err := c.StringSlice(); err == nil && slices.Contains(actions, "written") {
		f.log.Warn("FAULT INJECTION: recovery found lost tasks; exiting before the rest of its pass")
		os.Exit(faultExitCode)
	}
}
