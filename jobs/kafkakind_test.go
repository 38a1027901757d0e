package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/jobs"
)

// TestKafkaDestination: events go to the topic the template names, each
// once, acknowledged by every in-sync replica, with the key in the
// Idempotency-Key header and as the record key. No Kafka server can be
// installed on the development machines: the cluster is franz-go's kfake,
// started by the test, which speaks the Kafka protocol (3 brokers).
func TestKafkaDestination(t *testing.T) {
	t.Parallel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "webhooks.src"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	url := "kafka://" + strings.Join(cluster.ListenAddrs(), ",")
	b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: url, Topic: "webhooks.{source}"}})
	const n = 5
	b.deliverEvents(t, n, 20*time.Second)

	consumer, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics("webhooks.src"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	seen := map[string]int{}
	ctx, cancel := context.WithTimeout(testCtx(t), 10*time.Second)
	defer cancel()
	for len(seen) < n && ctx.Err() == nil {
		consumer.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			headers := map[string]string{}
			for _, h := range r.Headers {
				headers[h.Key] = string(h.Value)
			}
			id := headers["Webhookd-Event-Id"]
			key := "src:dst:" + id
			if string(r.Key) != key || headers["Idempotency-Key"] != key || string(r.Value) != fmt.Sprintf(`{"id":%q}`, id) {
				t.Errorf("record key %s headers %v value %s", r.Key, headers, r.Value)
			}
			seen[id]++
		})
	}
	if len(seen) != n {
		t.Fatalf("the topic held %v, want %d events", seen, n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("%s produced %d times", id, c)
		}
	}
}

// TestKafkaBrokerOutage: while the cluster drops every connection at
// its first request (kfake's control hook: a broker that has gone away),
// calls fail as attempts, saying so, and each ends within the
// destination's timeout; once it answers again they succeed. Every event
// is in the topic; a record of a call that timed out may be delivered
// beside its retry's (Kafka drops no repeat by key), and every copy
// carries the key as Idempotency-Key for the consumer to drop it.
func TestKafkaBrokerOutage(t *testing.T) {
	t.Parallel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "webhooks.src"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	var down atomic.Bool
	cluster.Control(func(kmsg.Request) (kmsg.Response, error, bool) {
		if !down.Load() {
			return nil, nil, false
		}
		cluster.KeepControl()
		return nil, errors.New("broker gone"), true
	})
	url := "kafka://" + strings.Join(cluster.ListenAddrs(), ",")
	b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: url, Topic: "webhooks.{source}", Timeout: 2 * time.Second, MaxAttempts: 100}})
	q := b.startWorker(t)
	b.enqueue(t, q, "evt_1")
	pipelinetest.Eventually(t, 15*time.Second, "evt_1 done", func() bool { return b.status(t, "src:dst:evt_1") == dedupe.StatusDone })

	down.Store(true)
	b.enqueue(t, q, "evt_2", "evt_3")
	pipelinetest.Eventually(t, 30*time.Second, "failed attempts while the cluster is gone", func() bool {
		return b.schema.Int(t, `SELECT count(*) FROM job_runs WHERE key IN ('src:dst:evt_2', 'src:dst:evt_3')
			AND status = 'failed' AND attempts >= 2 AND last_error LIKE 'kafka: %'`) == 2
	})
	if n := b.schema.Int(t, `SELECT count(*) FROM delivery_attempts WHERE duration_ms > 3000`); n != 0 {
		t.Errorf("%d calls outlasted the 2s timeout", n)
	}

	down.Store(false)
	pipelinetest.Eventually(t, 60*time.Second, "every run done once the cluster is back", func() bool {
		return b.schema.Int(t, `SELECT count(*) FROM job_runs WHERE status = 'done'`) == 3
	})
	consumer, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics("webhooks.src"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	seen := map[string]int{}
	for {
		ctx, cancel := context.WithTimeout(testCtx(t), 2*time.Second)
		fetches := consumer.PollFetches(ctx)
		cancel()
		n := 0
		fetches.EachRecord(func(r *kgo.Record) {
			n++
			for _, h := range r.Headers {
				if h.Key == "Idempotency-Key" {
					seen[string(h.Value)]++
					if string(h.Value) != string(r.Key) {
						t.Errorf("record of %s carries Idempotency-Key %s", r.Key, h.Value)
					}
				}
			}
		})
		if n == 0 {
			break
		}
	}
	if len(seen) != 3 || seen["src:dst:evt_1"] != 1 || seen["src:dst:evt_2"] < 1 || seen["src:dst:evt_3"] < 1 {
		t.Errorf("the topic held %v, want evt_1 once and every key", seen)
	}
	t.Logf("records per key after the outage: %v", seen)
}
