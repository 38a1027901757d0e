package jobs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

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
