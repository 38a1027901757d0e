package jobs_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/internal/testkit/proctest"
	"github.com/webhookd/webhookd/jobs"
)

// amqpURL is the RabbitMQ every development machine and CI runs (.ci/run
// checks it answers).
const amqpURL = "amqp://guest:guest@127.0.0.1:5672/"

// testQueue declares a queue of the test's own, deleted when it ends.
func testQueue(t testing.TB) (*amqp.Channel, string) {
	t.Helper()
	conn, err := amqp.Dial(amqpURL)
	if err != nil {
		t.Fatalf("RabbitMQ at 127.0.0.1:5672 (the broker destinations' tests need it): %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "webhookd-test-" + hex.EncodeToString(b[:])
	if _, err := ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = ch.QueueDelete(name, false, false, false) })
	return ch, name
}

// TestAMQPDestination: events go to RabbitMQ persistent, with the key as
// message_id and the call's headers, confirmed by the broker; a routing
// key no queue takes comes back (mandatory) and is a failed attempt.
func TestAMQPDestination(t *testing.T) {
	t.Parallel()
	ch, queue := testQueue(t)
	b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: amqpURL, RoutingKey: queue}})
	const n = 5
	b.deliverEvents(t, n, 15*time.Second)
	seen := map[string]bool{}
	for range n {
		m, ok, err := ch.Get(queue, true)
		if err != nil || !ok {
			t.Fatalf("queue get: %v %v", ok, err)
		}
		id, _ := m.Headers["Webhookd-Event-Id"].(string)
		if m.MessageId != "src:dst:"+id || m.DeliveryMode != amqp.Persistent || m.ContentType != "application/json" ||
			string(m.Body) != fmt.Sprintf(`{"id":%q}`, id) || m.Headers["Idempotency-Key"] != m.MessageId {
			t.Errorf("message %+v", m)
		}
		seen[id] = true
	}
	if len(seen) != n {
		t.Errorf("the queue held %v, want %d events once each", seen, n)
	}
	if _, ok, _ := ch.Get(queue, true); ok {
		t.Errorf("more messages than events")
	}
}

// TestAMQPDestinationUnroutable: a message no queue takes is returned and
// the run fails its attempts, saying so.
func TestAMQPDestinationUnroutable(t *testing.T) {
	t.Parallel()
	b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: amqpURL, RoutingKey: "webhookd-test-noqueue-{source}", MaxAttempts: 2}})
	q := b.startWorker(t)
	b.record(t, "evt_1", `{}`)
	if _, err := q.enqueuer.EnqueueEvents(testCtx(t), []dedupe.EventRef{{Source: "src", ExternalID: "evt_1"}}); err != nil {
		t.Fatal(err)
	}
	pipelinetest.Eventually(t, 15*time.Second, "the run dead", func() bool { return b.status(t, "src:dst:evt_1") == dedupe.StatusDead })
	if r := b.run(t, "src:dst:evt_1"); r.LastError == nil || !strings.Contains(*r.LastError, "no queue takes routing key webhookd-test-noqueue-src") {
		t.Errorf("run %+v, want dead saying no queue takes the routing key", r)
	}
}

// TestAMQPBrokerOutage: with RabbitMQ unreachable (a proxy in front of it
// cut: open connections closed, new ones refused), calls fail as
// attempts, saying so; once it is reachable again they succeed, each
// event in the queue once.
func TestAMQPBrokerOutage(t *testing.T) {
	t.Parallel()
	ch, queue := testQueue(t)
	proxy := proctest.StartProxy(t, "127.0.0.1:5672")
	b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: "amqp://guest:guest@" + proxy.Addr + "/", RoutingKey: queue,
		Timeout: 2 * time.Second, MaxAttempts: 100}})
	q := b.startWorker(t)
	b.enqueue(t, q, "evt_1")
	pipelinetest.Eventually(t, 10*time.Second, "evt_1 done", func() bool { return b.status(t, "src:dst:evt_1") == dedupe.StatusDone })

	proxy.Cut()
	b.enqueue(t, q, "evt_2", "evt_3")
	pipelinetest.Eventually(t, 20*time.Second, "failed attempts while the broker is unreachable", func() bool {
		return b.schema.Int(t, `SELECT count(*) FROM job_runs WHERE key IN ('src:dst:evt_2', 'src:dst:evt_3')
			AND status = 'failed' AND attempts >= 2 AND last_error LIKE 'amqp: %'`) == 2
	})
	if r := b.run(t, "src:dst:evt_2"); strings.Contains(*r.LastError, "guest:guest") {
		t.Errorf("last_error shows the URL's password: %s", *r.LastError)
	}

	proxy.Restore()
	pipelinetest.Eventually(t, 30*time.Second, "every run done once the broker is back", func() bool {
		return b.schema.Int(t, `SELECT count(*) FROM job_runs WHERE status = 'done'`) == 3
	})
	seen := map[string]int{}
	for {
		m, ok, err := ch.Get(queue, true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		seen[m.MessageId]++
	}
	if len(seen) != 3 || seen["src:dst:evt_1"] != 1 || seen["src:dst:evt_2"] != 1 || seen["src:dst:evt_3"] != 1 {
		t.Errorf("the queue held %v, want each of the 3 keys once", seen)
	}
}
