package jobs_test

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/testkit/redistest"
	"github.com/webhookd/webhookd/jobs"
)

// EnqueueEvents writes Asynq's records itself, in batches. These tests
// hold it to what Asynq's own client writes, so an Asynq upgrade that
// changes the layout fails here instead of losing tasks.

// TestEnqueueEventsMatchesAsynq enqueues the same tasks through Asynq's
// client and through EnqueueEvents, on two Redis databases, over a table
// of task shapes, and compares every key both leave (type and content;
// pending_since only for being the write's time), then reads each task
// back with Asynq's inspector.
func TestEnqueueEventsMatchesAsynq(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		givenID       string
		givenTimeout  time.Duration
		givenDestName string
	}{
		{name: "Plain", givenID: "evt_1", givenTimeout: 7 * time.Second, givenDestName: "dst"},
		{name: "DefaultTimeout", givenID: "evt_2", givenDestName: "dst"},
		{name: "LongTimeout", givenID: "evt_3", givenTimeout: 10 * time.Minute, givenDestName: "dst"},
		{name: "LongUnicodeID", givenID: "evt_ünïcødé_" + strings.Repeat("x", 300), givenTimeout: time.Second, givenDestName: "d-2"},
		{name: "IDWithSeparators", givenID: "a:b#2 c/d", givenTimeout: 3 * time.Second, givenDestName: "dst_3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			viaAsynq, viaBatch := redistest.New(t), redistest.New(t)
			queue := viaAsynq.Queue
			dest := buildDestination(t, jobs.DestinationSpec{Name: tc.givenDestName, Timeout: tc.givenTimeout})
			routes := jobs.Routes{"src": {tc.givenDestName: dest}}
			p := jobs.DeliverPayload{Source: "src", EventID: tc.givenID, Destination: tc.givenDestName}

			before := time.Now()
			if err := jobs.NewEnqueuer(viaAsynq.Client, queue, routes).Enqueue(ctx, p); err != nil {
				t.Fatal(err)
			}
			unrouted, err := jobs.NewEnqueuer(viaBatch.Client, queue, routes).EnqueueEvents(ctx, []dedupe.EventRef{{Source: "src", ExternalID: tc.givenID}})
			if err != nil || len(unrouted) != 0 {
				t.Fatalf("EnqueueEvents: unrouted %v, err %v", unrouted, err)
			}
			want, got := dumpRedis(t, viaAsynq.Client, before), dumpRedis(t, viaBatch.Client, before)
			for _, k := range slices.Sorted(maps.Keys(want)) {
				if got[k] != want[k] {
					t.Errorf("key %s: got %s, Asynq wrote %s", k, got[k], want[k])
				}
			}
			for k := range got {
				if _, ok := want[k]; !ok {
					t.Errorf("key %s written, Asynq writes no such key", k)
				}
			}

			info, err := asynq.NewInspectorFromRedisClient(viaBatch.Client).GetTaskInfo(queue, p.Key())
			if err != nil {
				t.Fatalf("Asynq's inspector cannot read the task: %v", err)
			}
			timeout := dest.Timeout + 30*time.Second
			if info.Type != jobs.TypeDeliver || info.State != asynq.TaskStatePending || info.Queue != queue ||
				info.Timeout != timeout || info.MaxRetry != 1<<20 || info.Retried != 0 || !info.Deadline.IsZero() {
				t.Errorf("task info %+v", info)
			}
		})
	}
}

// dumpRedis describes every key of the client's database by type and
// content, for comparing two writers. A hash's pending_since is checked
// to be a Unix ns time since since, and then shown as "now".
func dumpRedis(t *testing.T, rdb *redis.Client, since time.Time) map[string]string {
	t.Helper()
	ctx := testCtx(t)
	out := map[string]string{}
	for _, k := range rdb.Keys(ctx, "*").Val() {
		switch typ := rdb.Type(ctx, k).Val(); typ {
		case "hash":
			h := rdb.HGetAll(ctx, k).Val()
			if v, ok := h["pending_since"]; ok {
				ns, err := strconv.ParseInt(v, 10, 64)
				if err != nil || ns < since.UnixNano() || ns > time.Now().UnixNano() {
					t.Errorf("%s: pending_since %q, want the Unix ns time of the write", k, v)
				}
				h["pending_since"] = "now"
			}
			out[k] = fmt.Sprintf("hash %v", h)
		case "list":
			out[k] = fmt.Sprintf("list %v", rdb.LRange(ctx, k, 0, -1).Val())
		case "set":
			out[k] = fmt.Sprintf("set %v", slices.Sorted(slices.Values(rdb.SMembers(ctx, k).Val())))
		case "zset":
			out[k] = fmt.Sprintf("zset %v", rdb.ZRangeWithScores(ctx, k, 0, -1).Val())
		default:
			out[k] = typ + " " + rdb.Get(ctx, k).Val()
		}
	}
	return out
}

func TestEnqueueEvents(t *testing.T) {
	t.Parallel()

	routes := jobs.Routes{
		"src": {
			"a": buildDestination(t, jobs.DestinationSpec{Name: "a"}),
			"b": buildDestination(t, jobs.DestinationSpec{Name: "b"}),
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
