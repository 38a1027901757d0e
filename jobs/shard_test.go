package jobs_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/internal/testkit/redistest"
	"github.com/webhookd/webhookd/jobs"
)

func TestShards(t *testing.T) {
	t.Parallel()
	one := jobs.Shards{Queue: "webhookd", N: 1}
	if got := one.Of("src:dst:evt_1"); got != "webhookd" {
		t.Errorf("one shard: queue %q, want the queue's own name", got)
	}
	if got := one.Names(); !slices.Equal(got, []string{"webhookd"}) {
		t.Errorf("one shard: names %v", got)
	}
	four := jobs.Shards{Queue: "webhookd", N: 4}
	if got := four.Names(); !slices.Equal(got, []string{"webhookd_0", "webhookd_1", "webhookd_2", "webhookd_3"}) {
		t.Errorf("four shards: names %v", got)
	}
	counts := map[string]int{}
	for i := range 4000 {
		key := fmt.Sprintf("stripe:billing:evt_%d", i)
		q := four.Of(key)
		if q != four.Of(key) || !slices.Contains(four.Names(), q) {
			t.Fatalf("key %s: shard %q unstable or not one of %v", key, q, four.Names())
		}
		counts[q]++
	}
	for _, q := range four.Names() {
		if counts[q] < 800 || counts[q] > 1200 {
			t.Errorf("shard %s got %d of 4000 keys, want about 1000 (%v)", q, counts[q], counts)
		}
	}
	// The hash is part of the format: a process of another version must
	// put a key in the same shard.
	if got := four.Of("stripe:billing:evt_1"); got != "webhookd_2" {
		t.Errorf("shard of stripe:billing:evt_1 is %s; FNV-1a mod 4 says webhookd_2", got)
	}
	for _, tc := range []struct {
		queue string
		owns  bool
	}{
		{"webhookd", true}, {"webhookd_0", true}, {"webhookd_17", true},
		{"webhookd_", false}, {"webhookd_x", false}, {"webhookd_1a", false}, {"webhookdx", false}, {"other_1", false},
	} {
		if got := four.Owns(tc.queue); got != tc.owns {
			t.Errorf("Owns(%q) = %v, want %v", tc.queue, got, tc.owns)
		}
	}
}

// TestShardedEnqueuer: both ways of enqueuing (Asynq's client, the batch
// script) and recovery's ensure put a key's task in its shard, where
// Asynq's inspector finds it; a second enqueue of the key is a no-op.
func TestShardedEnqueuer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := redistest.New(t)
	routes := jobs.Routes{"src": {"dst": buildDestination(t, jobs.DestinationSpec{Name: "dst"})}}
	shards := jobs.Shards{Queue: r.Queue, N: 4}
	enq := jobs.NewShardedEnqueuer(r.Client, shards, routes)
	insp := asynq.NewInspectorFromRedisClient(r.Client)

	var refs []dedupe.EventRef
	for i := range 40 {
		refs = append(refs, dedupe.EventRef{Source: "src", ExternalID: fmt.Sprintf("evt_%d", i)})
	}
	if _, err := enq.EnqueueEvents(ctx, refs[:30]); err != nil {
		t.Fatal(err)
	}
	for _, ref := range refs[30:] {
		if err := enq.EnqueueEvent(ctx, ref.Source, ref.ExternalID); err != nil {
			t.Fatal(err)
		}
	}
	// Again, the other way round: every id is taken already.
	if _, err := enq.EnqueueEvents(ctx, refs[30:]); err != nil {
		t.Fatal(err)
	}
	for _, ref := range refs[:30] {
		if err := enq.EnqueueEvent(ctx, ref.Source, ref.ExternalID); err != nil {
			t.Fatal(err)
		}
	}
	total := 0
	for _, q := range shards.Names() {
		info, err := insp.GetQueueInfo(q)
		if err != nil {
			t.Fatalf("queue %s: %v", q, err)
		}
		if info.Pending == 0 {
			t.Errorf("shard %s is empty", q)
		}
		total += info.Pending
	}
	if total != len(refs) {
		t.Fatalf("%d tasks over the shards, want %d (one per key)", total, len(refs))
	}
	for _, ref := range refs {
		key := jobs.DeliverPayload{Source: ref.Source, EventID: ref.ExternalID, Destination: "dst"}.Key()
		info, err := insp.GetTaskInfo(shards.Of(key), key)
		if err != nil {
			t.Fatalf("task %s not in its shard %s: %v", key, shards.Of(key), err)
		}
		if info.Queue != shards.Of(key) || info.State != asynq.TaskStatePending {
			t.Errorf("task %s: queue %s state %v", key, info.Queue, info.State)
		}
	}
	// A replay's requeue finds the task in its shard and leaves it.
	p := jobs.DeliverPayload{Source: "src", EventID: "evt_0", Destination: "dst"}
	if err := enq.Requeue(ctx, p); err != nil {
		t.Fatal(err)
	}
	if n, _ := insp.GetQueueInfo(shards.Of(p.Key())); n == nil {
		t.Fatal("shard gone")
	}
	registered, err := shards.Registered(r.Client)
	if err != nil || !slices.Equal(registered, shards.Names()) {
		t.Fatalf("registered shard queues %v (%v), want %v", registered, err, shards.Names())
	}
}

// TestShardCountChange: tasks written while queue_shards was 1 sit in
// the old queue. A worker with 4 shards serves that queue too (it is
// registered in Redis), and recovery, driven by the outbox in Postgres,
// writes each unclaimed event's task into its new shard; each key is
// called once.
func TestShardCountChange(t *testing.T) {
	t.Parallel()
	d := newDestination(t, status(200))
	b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: d.URL}})
	r := redistest.New(t)
	ctx := testCtx(t)
	old := jobs.NewShardedEnqueuer(r.Client, jobs.Shards{Queue: r.Queue, N: 1}, b.routes)
	const events = 20
	var refs []dedupe.EventRef
	for i := range events {
		id := fmt.Sprintf("evt_%d", i)
		b.record(t, id, body)
		refs = append(refs, dedupe.EventRef{Source: "src", ExternalID: id})
	}
	if _, err := old.EnqueueEvents(ctx, refs); err != nil {
		t.Fatal(err)
	}

	shards := jobs.Shards{Queue: r.Queue, N: 4}
	served, err := shards.ServedQueues(r.Client)
	if err != nil || !slices.Equal(served, append(shards.Names(), r.Queue)) {
		t.Fatalf("served queues %v (%v), want the 4 shards and the old queue", served, err)
	}
	// Recovery first, with no worker: every event is unclaimed, so each
	// task is written into its shard (the old copies stay where they are).
	rec := jobs.NewReconciler(b.store, jobs.NewShardedEnqueuer(r.Client, shards, b.routes),
		jobs.ReconcilerConfig{MinAge: time.Millisecond, Logger: testLogger(t)})
	rep, err := rec.Pass(ctx)
	if err != nil || rep.Actions["handed_off"] != events {
		t.Fatalf("pass: %+v, %v; want %d tasks handed off into their new shards", rep, err, events)
	}
	insp := asynq.NewInspectorFromRedisClient(r.Client)
	for _, q := range served {
		info, err := insp.GetQueueInfo(q)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("queue %s: %d pending", q, info.Pending)
	}

	srv := jobs.NewServer(r.Client, b.handler, jobs.ServerConfig{
		Queues: served, Concurrency: 8, ShutdownTimeout: 2 * time.Second,
		Backoff: jobs.Backoff{Base: 10 * time.Millisecond, Max: 40 * time.Millisecond},
		Logger:  testLogger(t),
	})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	pipelinetest.Eventually(t, 15*time.Second, "every run done", func() bool {
		return b.schema.Int(t, `SELECT count(*) FROM job_runs WHERE status = 'done'`) == events
	})
	// Both copies of every key ran (the second found the key done, or
	// running and was told to come back later).
	pipelinetest.Eventually(t, 15*time.Second, "every copy taken", func() bool {
		for _, q := range served {
			info, err := insp.GetQueueInfo(q)
			if err != nil || info.Pending+info.Active > 0 {
				return false
			}
		}
		return true
	})
	calls := map[string]int{}
	for _, c := range d.Calls() {
		calls[c.Key]++
	}
	if len(calls) != events {
		t.Fatalf("%d keys called, want %d", len(calls), events)
	}
	for k, n := range calls {
		if n != 1 {
			t.Errorf("key %s called %d times, want once", k, n)
		}
	}
}

// TestWakeAcrossShards: a destination's held tasks sit in the retry sets
// of every shard; waking it makes each of them pending, and leaves the
// other destination's tasks waiting.
func TestWakeAcrossShards(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := redistest.New(t)
	routes := jobs.Routes{"src": {
		"dst":   buildDestination(t, jobs.DestinationSpec{Name: "dst"}),
		"other": buildDestination(t, jobs.DestinationSpec{Name: "other"}),
	}}
	shards := jobs.Shards{Queue: r.Queue, N: 4}
	enq := jobs.NewShardedEnqueuer(r.Client, shards, routes)
	insp := asynq.NewInspectorFromRedisClient(r.Client)

	var refs []dedupe.EventRef
	for i := range 40 {
		refs = append(refs, dedupe.EventRef{Source: "src", ExternalID: fmt.Sprintf("evt_%d", i)})
	}
	if _, err := enq.EnqueueEvents(ctx, refs); err != nil {
		t.Fatal(err)
	}
	// Hold every task as Asynq does after a retryable error: out of the
	// pending list, into the retry set an hour from now.
	later := float64(time.Now().Add(time.Hour).Unix())
	for _, ref := range refs {
		for _, dest := range []string{"dst", "other"} {
			key := jobs.DeliverPayload{Source: ref.Source, EventID: ref.ExternalID, Destination: dest}.Key()
			prefix := "asynq:{" + shards.Of(key) + "}:"
			if err := r.Client.LRem(ctx, prefix+"pending", 0, key).Err(); err != nil {
				t.Fatal(err)
			}
			if err := r.Client.ZAdd(ctx, prefix+"retry", redis.Z{Score: later, Member: key}).Err(); err != nil {
				t.Fatal(err)
			}
			if err := r.Client.HSet(ctx, prefix+"t:"+key, "state", "retry").Err(); err != nil {
				t.Fatal(err)
			}
		}
	}

	woke, err := enq.Wake(ctx, "src", "dst")
	if err != nil {
		t.Fatal(err)
	}
	if woke != len(refs) {
		t.Fatalf("woke %d tasks, want %d (every shard's)", woke, len(refs))
	}
	for _, ref := range refs {
		for dest, want := range map[string]asynq.TaskState{"dst": asynq.TaskStatePending, "other": asynq.TaskStateRetry} {
			key := jobs.DeliverPayload{Source: ref.Source, EventID: ref.ExternalID, Destination: dest}.Key()
			info, err := insp.GetTaskInfo(shards.Of(key), key)
			if err != nil {
				t.Fatalf("task %s: %v", key, err)
			}
			if info.State != want {
				t.Errorf("task %s after waking dst: %v, want %v", key, info.State, want)
			}
		}
	}
}
