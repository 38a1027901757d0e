package main

import (
	"log/slog"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/loadgen"
	"github.com/webhookd/webhookd/internal/pgtest"
	"github.com/webhookd/webhookd/internal/redistest"
)

// TestBenchRunsTheRealProcess runs the load generator briefly against
// webhookd as cmd wires it (run, gateway and worker) and checks that the
// exactly-once check passes. It asserts nothing about speed.
func TestBenchRunsTheRealProcess(t *testing.T) {
	t.Parallel()
	schema := pgtest.New(t)
	rdb := redistest.New(t)
	src, err := loadgen.BenchSource("standard")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := loadgen.Run(t.Context(), loadgen.Config{
		Start:        benchStart,
		Source:       &src,
		Concurrency:  4,
		Duration:     time.Second,
		Duplicates:   0.2,
		DatabaseURL:  schema.URL,
		RedisURL:     rdb.URL,
		Queue:        rdb.Queue,
		DrainTimeout: time.Minute,
		Log:          slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Check.Passed || rep.Acks == 0 || rep.Acks != rep.Requests || !rep.EndToEnd.Drained {
		t.Fatalf("check %+v; %d acks of %d requests; end to end %+v", rep.Check, rep.Acks, rep.Requests, rep.EndToEnd)
	}
}
