package jobs_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/testkit/proctest"
	"github.com/webhookd/webhookd/jobs"
)

// TestEnqueuerOnRedisCluster: on a 3-node Redis Cluster with 4 shards,
// the batch hand-off and recovery's ensure (each one script per shard,
// its keys in the shard's slot, pipelined with the registry's SADD in
// another slot) write every task where Asynq's inspector finds it, also
// after every node forgot its cached scripts (NOSCRIPT, then the body).
func TestEnqueuerOnRedisCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster := proctest.StartRedisCluster(t, 3)
	client := cluster.Client(t)
	routes := jobs.Routes{"src": {"dst": buildDestination(t, jobs.DestinationSpec{Name: "dst"})}}
	shards := jobs.Shards{Queue: "q", N: 4}
	enq := jobs.NewShardedEnqueuer(client, shards, routes)
	insp := asynq.NewInspectorFromRedisClient(client)

	refs := func(from, to int) []dedupe.EventRef {
		var out []dedupe.EventRef
		for i := from; i < to; i++ {
			out = append(out, dedupe.EventRef{Source: "src", ExternalID: fmt.Sprintf("evt_%d", i)})
		}
		return out
	}
	flush := func() {
		t.Helper()
		if err := client.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			return node.ScriptFlush(ctx).Err()
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := enq.EnqueueEvents(ctx, refs(0, 40)); err != nil {
		t.Fatalf("first batch: %v", err)
	}
	flush()
	if _, err := enq.EnqueueEvents(ctx, refs(40, 80)); err != nil {
		t.Fatalf("batch after SCRIPT FLUSH: %v", err)
	}
	flush()
	// Recovery's script, after a flush: a replay's requeue of a task
	// that is pending, and of one that Redis lost.
	lost := jobs.DeliverPayload{Source: "src", EventID: "evt_80", Destination: "dst"}
	for _, p := range []jobs.DeliverPayload{{Source: "src", EventID: "evt_0", Destination: "dst"}, lost} {
		if err := enq.Requeue(ctx, p); err != nil {
			t.Fatalf("requeue %s after SCRIPT FLUSH: %v", p.Key(), err)
		}
	}
	total := 0
	for _, q := range shards.Names() {
		info, err := insp.GetQueueInfo(q)
		if err != nil {
			t.Fatalf("queue %s: %v", q, err)
		}
		total += info.Pending
	}
	if total != 81 {
		t.Fatalf("%d tasks pending over the shards, want 81", total)
	}
	for i := range 81 {
		key := jobs.DeliverPayload{Source: "src", EventID: fmt.Sprintf("evt_%d", i), Destination: "dst"}.Key()
		if _, err := insp.GetTaskInfo(shards.Of(key), key); err != nil {
			t.Fatalf("task %s not in its shard %s: %v", key, shards.Of(key), err)
		}
	}
	// Asynq's own client on the cluster: an enqueue of a key whose task
	// is there counts as queued.
	if err := enq.Enqueue(ctx, lost); err != nil {
		t.Fatal(err)
	}
	registered, err := shards.Registered(client)
	if err != nil || len(registered) != 4 {
		t.Fatalf("registered queues %v (%v), want the 4 shards", registered, err)
	}
}
