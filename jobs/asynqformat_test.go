package jobs_test

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/redistest"
	"github.com/webhookd/webhookd/jobs"
)

// EnqueueEvents writes Asynq's records itself, in batches. These tests
// hold it to what Asynq's own client writes, so an Asynq upgrade that
// changes the layout fails here instead of losing tasks.

func TestEnqueueEventsMatchesAsynq(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	viaAsynq, viaBatch := redistest.New(t), redistest.New(t)
	queue := viaAsynq.Queue
	routes := jobs.Routes{"src": {"dst": {Name: "dst", URL: "http://127.0.0.1:1/", Timeout: 7 * time.Second}}}
	p := jobs.DeliverPayload{Source: "src", EventID: "evt_1", Destination: "dst"}

	before := time.Now()
	if err := jobs.NewEnqueuer(viaAsynq.Client, queue, routes).Enqueue(ctx, p); err != nil {
		t.Fatal(err)
	}
	unrouted, err := jobs.NewEnqueuer(viaBatch.Client, queue, routes).EnqueueEvents(ctx, []dedupe.EventRef{{Source: "src", ExternalID: "evt_1"}})
	if err != nil || len(unrouted) != 0 {
		t.Fatalf("EnqueueEvents: unrouted %v, err %v", unrouted, err)
	}

	taskKey := "asynq:{" + queue + "}:t:" + p.Key()
	want, got := viaAsynq.Client.HGetAll(ctx, taskKey).Val(), viaBatch.Client.HGetAll(ctx, taskKey).Val()
	if len(want) == 0 {
		t.Fatalf("Asynq wrote no hash at %s", taskKey)
	}
	for field, w := range want {
		if field == "pending_since" {
			continue
		}
		if got[field] != w {
			t.Errorf("field %s: got %q, Asynq wrote %q", field, got[field], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("fields: got %v, Asynq wrote %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	since, err := strconv.ParseInt(got["pending_since"], 10, 64)
	if err != nil || since < before.UnixNano() || since > time.Now().UnixNano() {
		t.Errorf("pending_since %q, want the Unix ns time of the write", got["pending_since"])
	}
	pendingKey := "asynq:{" + queue + "}:pending"
	if w, g := viaAsynq.Client.LRange(ctx, pendingKey, 0, -1).Val(), viaBatch.Client.LRange(ctx, pendingKey, 0, -1).Val(); fmt.Sprint(w) != fmt.Sprint(g) {
		t.Errorf("pending list: got %v, Asynq wrote %v", g, w)
	}
	if ok, _ := viaBatch.Client.SIsMember(ctx, "asynq:queues", queue).Result(); !ok {
		t.Errorf("queue %s not registered in asynq:queues", queue)
	}

	info, err := asynq.NewInspectorFromRedisClient(viaBatch.Client).GetTaskInfo(queue, p.Key())
	if err != nil {
		t.Fatalf("Asynq's inspector cannot read the task: %v", err)
	}
	if info.Type != jobs.TypeDeliver || info.State != asynq.TaskStatePending || info.Queue != queue ||
		info.Timeout != 37*time.Second || info.MaxRetry != 1<<20 || info.Retried != 0 || !info.Deadline.IsZero() {
		t.Errorf("task info %+v", info)
	}
	if string(info.Payload) != `{"source":"src","event_id":"evt_1","destination":"dst"}` {
		t.Errorf("payload %s", info.Payload)
	}
}

func TestEnqueueEvents(t *testing.T) {
	t.Parallel()

	routes := jobs.Routes{
		"src": {
			"a": {Name: "a", URL: "http://127.0.0.1:1/"},
			"b": {Name: "b", URL: "http://127.0.0.1:1/"},
		},
	}
	setup := func(t *testing.T) (*redistest.DB, *jobs.Enqueuer, string) {
		r := redistest.New(t)
		return r, jobs.NewEnqueuer(r.Client, r.Queue, routes), "asynq:{" + r.Queue + "}:pending"
	}

	t.Run("EveryDestinationInOrderAcrossScripts", func(t *testing.T) {
		t.Parallel()
		r, enq, pending := setup(t)
		// 700 events, 1,400 tasks: three script calls.
		refs := make([]dedupe.EventRef, 700)
		for i := range refs {
			refs[i] = dedupe.EventRef{Source: "src", ExternalID: fmt.Sprintf("evt_%04d", i)}
		}
		if _, err := enq.EnqueueEvents(testCtx(t), refs); err != nil {
			t.Fatal(err)
		}
		ids := r.Client.LRange(testCtx(t), pending, 0, -1).Val()
		if len(ids) != 1400 {
			t.Fatalf("%d tasks pending, want 1400", len(ids))
		}
		seen := map[string]bool{}
		for _, id := range ids {
			seen[id] = true
		}
		for _, ref := range refs {
			for _, d := range []string{"a", "b"} {
				if k := jobs.Key("src", d, ref.ExternalID, 1); !seen[k] {
					t.Fatalf("no task %s", k)
				}
			}
		}
		// Asynq takes tasks from the right: the first events come first.
		if last := ids[len(ids)-1]; last != jobs.Key("src", "a", "evt_0000", 1) && last != jobs.Key("src", "b", "evt_0000", 1) {
			t.Errorf("first task out would be %s, want one of evt_0000", last)
		}
	})

	t.Run("TakenIDsAreLeftAlone", func(t *testing.T) {
		t.Parallel()
		r, enq, pending := setup(t)
		ctx := testCtx(t)
		// A task Asynq's client enqueued, then archived: a batch naming
		// its id must neither requeue nor overwrite it.
		p := jobs.DeliverPayload{Source: "src", EventID: "evt_1", Destination: "a"}
		if err := enq.Enqueue(ctx, p); err != nil {
			t.Fatal(err)
		}
		insp := asynq.NewInspectorFromRedisClient(r.Client)
		if err := insp.ArchiveTask(r.Queue, p.Key()); err != nil {
			t.Fatal(err)
		}
		refs := []dedupe.EventRef{{Source: "src", ExternalID: "evt_1"}, {Source: "src", ExternalID: "evt_2"}}
		for range 2 {
			if _, err := enq.EnqueueEvents(ctx, refs); err != nil {
				t.Fatal(err)
			}
		}
		if n := r.Client.LLen(ctx, pending).Val(); n != 3 {
			t.Fatalf("%d tasks pending, want 3 (evt_1/b, evt_2/a, evt_2/b once each)", n)
		}
		info, err := insp.GetTaskInfo(r.Queue, p.Key())
		if err != nil || info.State != asynq.TaskStateArchived {
			t.Fatalf("archived task is now %+v (%v)", info, err)
		}
	})

	t.Run("UnroutedSourcesAreReturned", func(t *testing.T) {
		t.Parallel()
		r, enq, pending := setup(t)
		refs := []dedupe.EventRef{{Source: "gone", ExternalID: "evt_1"}, {Source: "src", ExternalID: "evt_2"}}
		unrouted, err := enq.EnqueueEvents(testCtx(t), refs)
		if err != nil {
			t.Fatal(err)
		}
		if len(unrouted) != 1 || unrouted[0] != refs[0] {
			t.Fatalf("unrouted %v, want %v", unrouted, refs[:1])
		}
		if n := r.Client.LLen(testCtx(t), pending).Val(); n != 2 {
			t.Fatalf("%d tasks pending, want 2", n)
		}
	})

	t.Run("AfterRedisForgotTheScript", func(t *testing.T) {
		t.Parallel()
		r, enq, pending := setup(t)
		ctx := testCtx(t)
		if _, err := enq.EnqueueEvents(ctx, []dedupe.EventRef{{Source: "src", ExternalID: "evt_1"}}); err != nil {
			t.Fatal(err)
		}
		// SCRIPT FLUSH is server-wide; the script is loaded again by
		// whoever needs it next, so parallel tests are unharmed.
		if err := r.Client.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := enq.EnqueueEvents(ctx, []dedupe.EventRef{{Source: "src", ExternalID: "evt_2"}}); err != nil {
			t.Fatalf("after SCRIPT FLUSH: %v", err)
		}
		if n := r.Client.LLen(ctx, pending).Val(); n != 4 {
			t.Fatalf("%d tasks pending, want 4", n)
		}
	})

	t.Run("RedisDownIsAnError", func(t *testing.T) {
		t.Parallel()
		down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second})
		t.Cleanup(func() { _ = down.Close() })
		enq := jobs.NewEnqueuer(down, "q", routes)
		if _, err := enq.EnqueueEvents(testCtx(t), []dedupe.EventRef{{Source: "src", ExternalID: "evt_1"}}); err == nil {
			t.Fatal("no error with Redis unreachable")
		}
	})
}
