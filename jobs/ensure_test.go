package jobs

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/webhookd/webhookd/internal/testkit/redistest"
)

// TestEnsureTasks holds ensureScript to Asynq's own view of each task
// state it meets: every state is made with Asynq's client, inspector or
// server, and read back with Asynq's inspector after the script.
func TestEnsureTasks(t *testing.T) {
	t.Parallel()
	routes := Routes{"src": {"dst": {Name: "dst", URL: "http://127.0.0.1:1/", Timeout: time.Second}}}
	type bundle struct {
		r    *redistest.DB
		enq  *Enqueuer
		insp *asynq.Inspector
		p    DeliverPayload
		task deliverTask
	}
	setup := func(t *testing.T) bundle {
		r := redistest.New(t)
		p := DeliverPayload{Source: "src", EventID: "evt_1", Destination: "dst"}
		enq := NewEnqueuer(r.Client, r.Queue, routes)
		task, err := enq.newDeliverTask(p, routes["src"]["dst"])
		if err != nil {
			t.Fatal(err)
		}
		return bundle{r: r, enq: enq, insp: asynq.NewInspectorFromRedisClient(r.Client), p: p, task: task}
	}
	ensure := func(t *testing.T, b bundle, rescue bool, takeAfter time.Time) taskAction {
		t.Helper()
		got, err := b.enq.ensureTasks(context.Background(), []ensureRequest{{task: b.task, rescue: rescue, takeAfter: takeAfter}})
		if err != nil || len(got) != 1 {
			t.Fatalf("ensureTasks: %v %v", got, err)
		}
		return got[0]
	}
	state := func(t *testing.T, b bundle) asynq.TaskState {
		t.Helper()
		info, err := b.insp.GetTaskInfo(b.r.Queue, b.p.Key())
		if err != nil {
			t.Fatalf("Asynq's inspector cannot read the task: %v", err)
		}
		return info.State
	}
	lists := func(t *testing.T, b bundle) string {
		t.Helper()
		ctx := context.Background()
		prefix := asynqQueueKeyPrefix(b.r.Queue)
		return fmt.Sprintf("pending %d active %d lease %d scheduled %d retry %d archived %d",
			b.r.Client.LLen(ctx, prefix+"pending").Val(), b.r.Client.LLen(ctx, prefix+"active").Val(),
			b.r.Client.ZCard(ctx, prefix+"lease").Val(), b.r.Client.ZCard(ctx, prefix+"scheduled").Val(),
			b.r.Client.ZCard(ctx, prefix+"retry").Val(), b.r.Client.ZCard(ctx, prefix+"archived").Val())
	}
	const onlyPending = "pending 1 active 0 lease 0 scheduled 0 retry 0 archived 0"

	t.Run("MissingIsWritten", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		if a := ensure(t, b, false, time.Now()); a != taskWritten {
			t.Fatalf("action %s, want written", a)
		}
		if s, l := state(t, b), lists(t, b); s != asynq.TaskStatePending || l != onlyPending {
			t.Fatalf("after: %s, %s", s, l)
		}
		if a := ensure(t, b, true, time.Now()); a != taskPending {
			t.Fatalf("second call: %s, want pending (left alone)", a)
		}
	})

	t.Run("ScheduledLaterIsHastened", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		if _, err := b.enq.client.Enqueue(asynq.NewTask(TypeDeliver, b.task.payload), asynq.TaskID(b.task.id),
			asynq.Queue(b.r.Queue), asynq.ProcessIn(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if a := ensure(t, b, false, time.Now().Add(2*time.Hour)); a != taskWaiting {
			t.Fatalf("due before the task's time: %s, want waiting", a)
		}
		if a := ensure(t, b, false, time.Now()); a != taskHastened {
			t.Fatalf("due now: %s, want hastened", a)
		}
		if s, l := state(t, b), lists(t, b); s != asynq.TaskStatePending || l != onlyPending {
			t.Fatalf("after: %s, %s", s, l)
		}
	})

	t.Run("ArchivedIsRevived", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		if err := b.enq.Enqueue(context.Background(), b.p); err != nil {
			t.Fatal(err)
		}
		if err := b.insp.ArchiveTask(b.r.Queue, b.task.id); err != nil {
			t.Fatal(err)
		}
		if a := ensure(t, b, false, time.Now()); a != taskRevived {
			t.Fatalf("action %s, want revived", a)
		}
		if s, l := state(t, b), lists(t, b); s != asynq.TaskStatePending || l != onlyPending {
			t.Fatalf("after: %s, %s", s, l)
		}
	})

	t.Run("ActiveIsRescuedOnlyWhenAsked", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var runs atomic.Int32
		release := make(chan struct{})
		srv := asynq.NewServerFromRedisClient(b.r.Client, asynq.Config{
			Queues: map[string]int{b.r.Queue: 1}, Concurrency: 2, TaskCheckInterval: 50 * time.Millisecond,
			LogLevel: asynq.FatalLevel, ShutdownTimeout: time.Second,
		})
		mux := asynq.NewServeMux()
		mux.HandleFunc(TypeDeliver, func(ctx context.Context, _ *asynq.Task) error {
			if runs.Add(1) == 1 {
				select { // the first run hangs, like a worker that died mid-task
				case <-release:
				case <-ctx.Done():
				}
			}
			return nil
		})
		if err := srv.Start(mux); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Shutdown)
		t.Cleanup(func() { close(release) })
		if err := b.enq.Enqueue(context.Background(), b.p); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for runs.Load() == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the server never took the task")
			}
			time.Sleep(20 * time.Millisecond)
		}
		if a := ensure(t, b, false, time.Now()); a != taskActive {
			t.Fatalf("without rescue: %s, want active (left alone)", a)
		}
		if a := ensure(t, b, true, time.Now()); a != taskRescued {
			t.Fatalf("with rescue: %s, want rescued", a)
		}
		// Asynq's own server takes the rescued task again.
		for runs.Load() < 2 {
			if time.Now().After(deadline) {
				t.Fatalf("the rescued task never ran again (%s)", lists(t, b))
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}
