package jobs_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/testkit/logtest"
	"github.com/webhookd/webhookd/internal/testkit/redistest"
	"github.com/webhookd/webhookd/jobs"
)

// lostQueue refuses every enqueue, as Redis down does.
type lostQueue struct{}

func (lostQueue) Requeue(context.Context, jobs.DeliverPayload) error {
	return errors.New("redis: connection refused")
}

func (lostQueue) WakeKeys(context.Context, []string) (int, error) {
	return 0, errors.New("redis: connection refused")
}

// TestReplayerRules drives the replay rules on real Postgres and Redis,
// without HTTP: per destination, no run → first run enqueued (only the
// destinations whose filter wants the type, unless one is named); done →
// the stored result, nothing enqueued; dead → reopened with the same key;
// force → generation 2 under <key>#2, recorded with who and why, its
// audit line on the context's logger; bad and unknown requests refused;
// a lost enqueue leaves the run due in Postgres; a bulk dry run changes
// nothing.
func TestReplayerRules(t *testing.T) {
	t.Parallel()
	b := setup(t, handlerOptions{})
	ctx := testCtx(t)
	routes := jobs.Routes{"src": {
		"dst":     buildDestination(t, jobs.DestinationSpec{Name: "dst"}),
		"charges": buildDestination(t, jobs.DestinationSpec{Name: "charges", Filter: []string{"charge.*"}}),
	}}
	r := redistest.New(t)
	insp := asynq.NewInspectorFromRedisClient(r.Client)
	rep := jobs.NewReplayer(b.store, jobs.NewEnqueuer(r.Client, r.Queue, routes), routes, jobs.ReplayerConfig{Logger: b.logger})
	for _, id := range []string{"e1", "e2"} {
		ev := dedupe.Event{Source: "src", ExternalID: id, EventType: "invoice.paid", ContentType: "application/json", Payload: []byte(`{}`)}
		if _, err := dedupe.RecordBatch(ctx, b.schema.Pool, []dedupe.Event{ev}); err != nil {
			t.Fatal(err)
		}
	}
	replay := func(req jobs.ReplayRequest) jobs.ReplayResult {
		t.Helper()
		res, err := rep.Replay(ctx, req)
		if err != nil {
			t.Fatalf("replay %+v: %v", req, err)
		}
		return res
	}
	queued := func(key string) bool {
		_, err := insp.GetTaskInfo(r.Queue, key)
		return err == nil
	}

	// No run yet: the first run of the destination that wants the type.
	res := replay(jobs.ReplayRequest{Source: "src", EventID: "e1"})
	if !res.Enqueued || len(res.Runs) != 1 || res.Runs[0].Destination != "dst" || res.Runs[0].Action != jobs.ActionEnqueued ||
		res.Runs[0].Key != "src:dst:e1" || !queued("src:dst:e1") || b.status(t, "src:dst:e1") != dedupe.StatusFailed {
		t.Fatalf("first replay: %+v", res)
	}
	if b.status(t, "src:charges:e1") != "" {
		t.Fatal("a replay to every destination opened a run for one whose filter does not want the type")
	}
	// A destination named on purpose is replayed whatever its filter says.
	if res := replay(jobs.ReplayRequest{Source: "src", EventID: "e1", Destination: "charges"}); len(res.Runs) != 1 ||
		res.Runs[0].Action != jobs.ActionEnqueued || !queued("src:charges:e1") {
		t.Fatalf("named destination: %+v", res)
	}

	// Done: the stored result, nothing enqueued.
	b.exec(t, `UPDATE job_runs SET status = 'done', result = '{"status_code":200}' WHERE key = 'src:dst:e1'`)
	if err := insp.DeleteTask(r.Queue, "src:dst:e1"); err != nil {
		t.Fatal(err)
	}
	res = replay(jobs.ReplayRequest{Source: "src", EventID: "e1", Destination: "dst"})
	if res.Enqueued || res.Runs[0].Action != jobs.ActionStoredResult || string(res.Runs[0].Result) != `{"status_code": 200}` || queued("src:dst:e1") {
		t.Fatalf("replay of a done run: %+v (result %s)", res, res.Runs[0].Result)
	}

	// Dead: reopened with the same key, attempts reset.
	b.exec(t, `UPDATE job_runs SET status = 'dead', attempts = 20 WHERE key = 'src:charges:e1'`)
	res = replay(jobs.ReplayRequest{Source: "src", EventID: "e1", Destination: "charges", By: "bob"})
	if row := b.run(t, "src:charges:e1"); res.Runs[0].Action != jobs.ActionRequeued || res.Runs[0].Key != "src:charges:e1" ||
		row.Status != dedupe.StatusFailed || row.Attempts != 0 {
		t.Fatalf("replay of a dead run: %+v, row %+v", res, row)
	}

	// Force: it must name its destinations and a reason.
	for _, req := range []jobs.ReplayRequest{
		{Source: "src", EventID: "e1", Force: true, Reason: "why"},
		{Source: "src", EventID: "e1", Force: true, Destination: "dst", Reason: " "},
	} {
		if _, err := rep.Replay(ctx, req); !errors.Is(err, jobs.ErrBadReplay) {
			t.Errorf("forced replay %+v: %v, want ErrBadReplay", req, err)
		}
	}
	logs := &logtest.Buffer{}
	res, err := rep.Replay(jobs.WithLogger(ctx, slog.New(slog.NewJSONHandler(logs, nil))),
		jobs.ReplayRequest{Source: "src", EventID: "e1", Force: true, Destination: "dst", By: "carol", Reason: "resend"})
	if err != nil || res.Runs[0].Action != jobs.ActionForced || res.Runs[0].Key != "src:dst:e1#2" || res.Runs[0].Generation != 2 ||
		!queued("src:dst:e1#2") {
		t.Fatalf("forced replay: %+v, %v", res, err)
	}
	var by, reason string
	if err := b.schema.Pool.QueryRow(ctx, `SELECT replayed_by, replay_reason FROM job_runs WHERE key = 'src:dst:e1#2'`).Scan(&by, &reason); err != nil ||
		by != "carol" || reason != "resend" {
		t.Errorf("forced run recorded by %q, reason %q (%v)", by, reason, err)
	}
	var audit map[string]any
	for _, l := range logs.Lines(t) {
		if l["msg"] == "forced replay recorded: new generation" {
			audit = l
		}
	}
	if audit["key"] != "src:dst:e1#2" || audit["by"] != "carol" || audit["reason"] != "resend" {
		t.Errorf("audit line on the context's logger: %v", audit)
	}

	// Unknown source, destination or event.
	for req, want := range map[jobs.ReplayRequest]error{
		{Source: "nope", EventID: "e1"}:                     jobs.ErrUnknownSource,
		{Source: "src", EventID: "e1", Destination: "nope"}: jobs.ErrUnknownDestination,
		{Source: "src", EventID: "missing"}:                 dedupe.ErrNotFound,
	} {
		if _, err := rep.Replay(ctx, req); !errors.Is(err, want) {
			t.Errorf("replay %+v: %v, want %v", req, err, want)
		}
	}

	// A lost enqueue: ErrEnqueueFailed with the result, the run due in
	// Postgres for the reconciler.
	lost := jobs.NewReplayer(b.store, lostQueue{}, routes, jobs.ReplayerConfig{Logger: b.logger})
	res, err = lost.Replay(ctx, jobs.ReplayRequest{Source: "src", EventID: "e2"})
	if !errors.Is(err, jobs.ErrEnqueueFailed) || res.Enqueued || len(res.Runs) != 1 || res.Runs[0].Error == "" ||
		b.status(t, "src:dst:e2") != dedupe.StatusFailed {
		t.Fatalf("lost enqueue: %+v, %v", res, err)
	}

	// Bulk: a dry run counts and lists, and changes nothing.
	runs := b.schema.Int(t, `SELECT count(*) FROM job_runs`)
	f := dedupe.EventFilter{Source: "src"}
	bulk, err := rep.Bulk(ctx, jobs.BulkRequest{Filter: f, Limit: 10, DryRun: true})
	if err != nil || bulk.Matched != 2 || bulk.Selected != 2 || len(bulk.Events) != 2 || bulk.Enqueued != 0 {
		t.Fatalf("bulk dry run: %+v, %v", bulk, err)
	}
	if got := b.schema.Int(t, `SELECT count(*) FROM job_runs`); got != runs {
		t.Errorf("a dry run changed the runs: %d, was %d", got, runs)
	}
	if _, err := rep.Bulk(ctx, jobs.BulkRequest{Filter: f, DryRun: true}); !errors.Is(err, jobs.ErrBadReplay) {
		t.Errorf("bulk without a limit: %v, want ErrBadReplay", err)
	}
	if _, err := rep.Bulk(ctx, jobs.BulkRequest{Filter: dedupe.EventFilter{Source: "nope"}, Limit: 10}); !errors.Is(err, jobs.ErrUnknownSource) {
		t.Errorf("bulk of an unknown source: %v, want ErrUnknownSource", err)
	}
}

// exec runs a statement on the bundle's schema.
func (b *bundle) exec(t *testing.T, sql string) {
	t.Helper()
	if _, err := b.schema.Pool.Exec(testCtx(t), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
