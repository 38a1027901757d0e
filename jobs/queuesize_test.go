package jobs_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/internal/testkit/redistest"
	"github.com/webhookd/webhookd/jobs"
)

// TestQueueLatencyIsOldestPendingTaskAge: webhookd_queue_latency_seconds
// exists at zero for a registered queue and then tells how long the oldest pending task has waited (what the
// queue-age alert watches).
func TestQueueLatencyIsOldestPendingTaskAge(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	r := redistest.New(t)
	reg := prometheus.NewRegistry()
	m := jobs.NewMetrics(reg)
	m.RegisterQueues(jobs.Shards{Queue: r.Queue})
	latency := func() float64 {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() != "webhookd_queue_latency_seconds" {
				continue
			}
			for _, s := range f.GetMetric() {
				if len(s.GetLabel()) == 1 && s.GetLabel()[0].GetValue() == r.Queue {
					return s.GetGauge().GetValue()
				}
			}
		}
		t.Fatalf("no webhookd_queue_latency_seconds{queue=%q}", r.Queue)
		return 0
	}
	if got := latency(); got != 0 {
		t.Fatalf("registered queue: latency %v, want 0", got)
	}

	routes := jobs.Routes{"src": {"dst": jobs.Destination{Name: "dst", URL: "http://127.0.0.1:1/"}}}
	enqueued := time.Now()
	if err := jobs.NewEnqueuer(r.Client, r.Queue, routes).Enqueue(ctx, jobs.DeliverPayload{Source: "src", EventID: "evt_1", Destination: "dst"}); err != nil {
		t.Fatal(err)
	}
	var got float64
	pipelinetest.Eventually(t, 10*time.Second, "the pending task's age to reach 1s", func() bool {
		if err := m.RefreshQueueSizes(r.Client, r.Queue); err != nil {
			t.Fatal(err)
		}
		got = latency()
		return got >= 1
	})
	if waited := time.Since(enqueued).Seconds(); got > waited+1 {
		t.Errorf("latency %.2fs, but the task was enqueued %.2fs ago", got, waited)
	}
}
