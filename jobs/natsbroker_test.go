package jobs_test

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/testkit/natstest"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/jobs"
)

// natsStream creates the stream "EVENTS" on "events.>" (2-minute
// duplicate window) on srv and returns it.
func natsStream(t testing.TB, srv *natstest.Server) jetstream.Stream {
	t.Helper()
	nc, err := nats.Connect(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.CreateStream(testCtx(t), jetstream.StreamConfig{Name: "EVENTS", Subjects: []string{"events.>"}, Duplicates: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestNATSBrokerOutage: with the broker gone, calls fail as attempts
// (the run stays failed, retried, saying why); once it is back they
// succeed, each event in the stream once; a forced repeat of a key after
// the restart is still dropped by JetStream's duplicate window.
func TestNATSBrokerOutage(t *testing.T) {
	t.Parallel()
	srv := natstest.New(t)
	natsStream(t, srv)
	b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: srv.URL, Subject: "events.{source}", Timeout: time.Second, MaxAttempts: 100}})
	q := b.startWorker(t)
	b.enqueue(t, q, "evt_1")
	pipelinetest.Eventually(t, 10*time.Second, "evt_1 done", func() bool { return b.status(t, "src:dst:evt_1") == dedupe.StatusDone })

	srv.Stop()
	b.enqueue(t, q, "evt_2", "evt_3")
	pipelinetest.Eventually(t, 20*time.Second, "failed attempts while the broker is gone", func() bool {
		return b.schema.Int(t, `SELECT count(*) FROM job_runs WHERE key IN ('src:dst:evt_2', 'src:dst:evt_3')
			AND status = 'failed' AND attempts >= 2 AND last_error LIKE 'nats: %'`) == 2
	})

	srv.Start(t)
	pipelinetest.Eventually(t, 30*time.Second, "every run done once the broker is back", func() bool {
		return b.schema.Int(t, `SELECT count(*) FROM job_runs WHERE status = 'done'`) == 3
	})
	st := natsStream(t, srv)
	info, err := st.Info(testCtx(t))
	if err != nil || info.State.Msgs != 3 {
		t.Fatalf("the stream holds %v messages (%v), want 3", info.State.Msgs, err)
	}

	// A forced repeat of evt_2's key (a worker that published and died
	// before storing the outcome) is dropped by the stream.
	b.exec(t, `UPDATE job_runs SET status = 'failed', attempts = 1, retry_at = now(), completed_at = NULL WHERE key = 'src:dst:evt_2'`)
	if err := q.enqueuer.Requeue(testCtx(t), jobs.DeliverPayload{Source: "src", EventID: "evt_2", Destination: "dst"}); err != nil {
		t.Fatal(err)
	}
	pipelinetest.Eventually(t, 15*time.Second, "the repeat done", func() bool {
		r := b.run(t, "src:dst:evt_2")
		return r.Status == dedupe.StatusDone && r.Result != nil && strings.Contains(*r.Result, `"duplicate": true`)
	})
	if info, err := st.Info(testCtx(t)); err != nil || info.State.Msgs != 3 {
		t.Errorf("after the repeat the stream holds %v messages (%v), want still 3", info.State.Msgs, err)
	}
}

// TestBrokerConnectionsRetired: a destination a reload removes or changes
// closes its broker connection once retired (Routes.Handover, Close); an
// unchanged one keeps it; shutdown closes every one.
func TestBrokerConnectionsRetired(t *testing.T) {
	t.Parallel()
	srv := natstest.New(t)
	natsStream(t, srv)
	spec := func(name, subject string) jobs.DestinationSpec {
		return jobs.DestinationSpec{Name: name, URL: srv.URL, Subject: subject}
	}
	old := jobs.Routes{"src": {
		"kept":    buildDestination(t, spec("kept", "events.kept")),
		"changed": buildDestination(t, spec("changed", "events.changed")),
		"removed": buildDestination(t, spec("removed", "events.removed")),
	}}
	b := setup(t, handlerOptions{dest: spec("kept", "events.kept")})
	// One call each opens the three connections.
	h := jobs.NewHandler(b.store, jobs.HandlerConfig{Routes: old, Lease: time.Minute, Logger: b.logger})
	for _, name := range []string{"kept", "changed", "removed"} {
		b.record(t, "evt_"+name, `{}`)
		if err := h.Deliver(testCtx(t), jobs.DeliverPayload{Source: "src", EventID: "evt_" + name, Destination: name}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if n := srv.Clients(t, "webhookd"); n != 3 {
		t.Fatalf("%d connections, want 3", n)
	}
	next := jobs.Routes{"src": {
		"kept":    buildDestination(t, spec("kept", "events.kept")),
		"changed": buildDestination(t, spec("changed", "events.changed.v2")),
	}}
	retired := next.Handover(old, func(_, name string) bool { return name == "kept" })
	if names := strings.Join(slices.Sorted(maps.Keys(retired["src"])), ","); names != "changed,removed" {
		t.Fatalf("retired %q, want changed,removed", names)
	}
	retired.Close()
	pipelinetest.Eventually(t, 5*time.Second, "the retired connections closed", func() bool { return srv.Clients(t, "webhookd") == 1 })
	// The kept destination calls on its old connection.
	h = jobs.NewHandler(b.store, jobs.HandlerConfig{Routes: next, Lease: time.Minute, Logger: b.logger})
	b.record(t, "evt_again", `{}`)
	if err := h.Deliver(testCtx(t), jobs.DeliverPayload{Source: "src", EventID: "evt_again", Destination: "kept"}); err != nil || b.status(t, "src:kept:evt_again") != dedupe.StatusDone {
		t.Fatalf("the kept destination after the reload: %v, %s", err, b.status(t, "src:kept:evt_again"))
	}
	if n := srv.Clients(t, "webhookd"); n != 1 {
		t.Errorf("%d connections after the kept destination's call, want still 1", n)
	}
	next.Close()
	pipelinetest.Eventually(t, 5*time.Second, "every connection closed at shutdown", func() bool { return srv.Clients(t, "webhookd") == 0 })
}
