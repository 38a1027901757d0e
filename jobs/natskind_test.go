package jobs_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/jobs"
)

// natsURL is the NATS server with JetStream every development machine
// and CI runs (.ci/run checks it answers).
const natsURL = "nats://127.0.0.1:4222"

// testStream creates a JetStream stream of the test's own, on subjects
// "<prefix>.>", deleted when the test ends.
func testStream(t *testing.T) (jetstream.Stream, string) {
	t.Helper()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatalf("NATS at %s (the broker destinations' tests need it): %v", natsURL, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "WEBHOOKD_TEST_" + strings.ToUpper(hex.EncodeToString(b[:]))
	prefix := "webhookd-test." + hex.EncodeToString(b[:])
	st, err := js.CreateStream(testCtx(t), jetstream.StreamConfig{Name: name, Subjects: []string{prefix + ".>"}, Duplicates: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })
	return st, prefix
}

// TestNATSDestination: events go to a JetStream stream on the subject the
// template names, acknowledged by the stream, with the key as
// Nats-Msg-Id; a call repeated with the same key (a worker that published
// and died before storing the outcome) is dropped by the stream, and the
// run is done; a subject no stream takes is a failed attempt.
func TestNATSDestination(t *testing.T) {
	t.Parallel()
	st, prefix := testStream(t)
	b := setup(t, handlerOptions{lease: time.Second, dest: jobs.DestinationSpec{URL: natsURL, Subject: prefix + ".{source}.{destination}"}})
	const n = 5
	q := b.deliverEvents(t, n, 15*time.Second)
	info, err := st.Info(testCtx(t))
	if err != nil || info.State.Msgs != n {
		t.Fatalf("the stream holds %v messages (%v), want %d", info.State.Msgs, err, n)
	}
	for seq := uint64(1); seq <= n; seq++ {
		m, err := st.GetMsg(testCtx(t), seq)
		if err != nil {
			t.Fatal(err)
		}
		id := m.Header.Get("Webhookd-Event-Id")
		key := "src:dst:" + id
		if m.Subject != prefix+".src.dst" || m.Header.Get("Nats-Msg-Id") != key || m.Header.Get("Idempotency-Key") != key ||
			string(m.Data) != fmt.Sprintf(`{"id":%q}`, id) {
			t.Errorf("message %d: subject %s headers %v data %s", seq, m.Subject, m.Header, m.Data)
		}
	}

	// A worker that published evt_0 and died before storing the outcome:
	// the call goes again with the same key, the stream drops it.
	b.exec(t, `UPDATE job_runs SET status = 'failed', attempts = 1, retry_at = now(), completed_at = NULL WHERE key = 'src:dst:evt_0'`)
	if err := q.enqueuer.Requeue(testCtx(t), jobs.DeliverPayload{Source: "src", EventID: "evt_0", Destination: "dst"}); err != nil {
		t.Fatal(err)
	}
	pipelinetest.Eventually(t, 15*time.Second, "the repeated call done", func() bool {
		r := b.run(t, "src:dst:evt_0")
		return r.Status == dedupe.StatusDone && r.Result != nil && strings.Contains(*r.Result, `"duplicate": true`)
	})
	if info, err := st.Info(testCtx(t)); err != nil || info.State.Msgs != n {
		t.Errorf("after the repeat the stream holds %v messages (%v), want still %d", info.State.Msgs, err, n)
	}
}

// TestNATSDestinationWithoutAStream: a subject no stream takes is a failed
// attempt (retried, then dead), saying so.
func TestNATSDestinationWithoutAStream(t *testing.T) {
	t.Parallel()
	b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: natsURL, Subject: "webhookd-test.nostream.{source}", MaxAttempts: 2}})
	q := b.startWorker(t)
	b.record(t, "evt_1", `{}`)
	if _, err := q.enqueuer.EnqueueEvents(testCtx(t), []dedupe.EventRef{{Source: "src", ExternalID: "evt_1"}}); err != nil {
		t.Fatal(err)
	}
	pipelinetest.Eventually(t, 15*time.Second, "the run dead", func() bool { return b.status(t, "src:dst:evt_1") == dedupe.StatusDead })
	if r := b.run(t, "src:dst:evt_1"); r.Attempts != 2 || r.LastError == nil || !strings.Contains(*r.LastError, "no stream takes subject webhookd-test.nostream.src") {
		t.Errorf("run %+v, want dead after 2 attempts saying no stream takes the subject", r)
	}
}
