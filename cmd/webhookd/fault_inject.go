//go:build faultinject

package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/webhookd/webhookd/dedupe"
)

// faultEnv names the fault to inject; only builds with the faultinject
// tag read it. Faults:
//
//	exit-after-commit  exit with status 3 right after an event's row has
//	                   committed, before the gateway answers or hands the
//	                   event to the queue
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
