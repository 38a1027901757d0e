package jobs_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/webhookd/webhookd/internal/sink"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
)

// TestQueueLossIsRecovered: Redis loses every queued task (a restart
// without persistence); the reconciler finds the unclaimed events in the
// outbox, writes their tasks again, and each is delivered once.
func TestQueueLossIsRecovered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dest := sink.New(nil)
	ts := httptest.NewServer(dest)
	defer ts.Close()

	// A gateway with no worker: tasks stay in Redis.
	gw := pipelinetest.Start(t, pipelinetest.Options{
		Destinations: map[string]string{"billing": ts.URL}, NoWorker: true,
	})
	const events = 5
	for i := range events {
		body := fmt.Appendf(nil, `{"id":"evt_lost_%d"}`, i)
		if code, answer := gw.Send(t, body); code != http.StatusAccepted {
			t.Fatalf("send: %d %s", code, answer)
		}
	}
	// After a flush Asynq's queue registry is gone too, so count the
	// pending list itself.
	pending := func() int {
		return int(gw.Redis.Client.LLen(ctx, "asynq:{"+gw.Redis.Queue+"}:pending").Val())
	}
	pipelinetest.Eventually(t, 10*time.Second, "tasks queued", func() bool { return pending() == events })

	// Redis loses everything.
	if err := gw.Redis.Client.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	pipelinetest.Eventually(t, 10*time.Second, "tasks queued again", func() bool { return pending() == events })
	// The queue is listed again for the dashboard and the queue metrics,
	// though this process's Asynq client registered it before the flush.
	queues, err := asynq.NewInspectorFromRedisClient(gw.Redis.Client).Queues()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(queues, gw.Redis.Queue) {
		t.Errorf("queues listed after the loss %v, want %s among them", queues, gw.Redis.Queue)
	}

	// A worker drains them: each key reaches the destination once.
	pipelinetest.Start(t, pipelinetest.Options{
		Destinations: map[string]string{"billing": ts.URL}, Schema: gw.Schema, Redis: gw.Redis,
	})
	pipelinetest.Eventually(t, 15*time.Second, "deliveries", func() bool { return dest.Stats().Keys == events })
	time.Sleep(500 * time.Millisecond)
	if st := dest.Stats(); st.Calls != events || len(st.Repeated) != 0 {
		t.Fatalf("destination saw %d calls (repeated %v), want %d once each", st.Calls, st.Repeated, events)
	}
}
