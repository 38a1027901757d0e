package jobs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/testkit/redistest"
	"github.com/webhookd/webhookd/jobs"
)

// BenchmarkEnqueue compares the two ways tasks reach Redis, per event:
// Asynq's client, one round trip and script per task (what the sweeper and
// replays use), and EnqueueEvents, one script call per batch (the relay).
func BenchmarkEnqueue(b *testing.B) {
	routes := jobs.Routes{"src": {"dst": buildDestination(b, jobs.DestinationSpec{Name: "dst"})}}
	ctx := context.Background()

	b.Run("AsynqClientPerTask", func(b *testing.B) {
		r := redistest.New(b)
		enq := jobs.NewEnqueuer(r.Client, r.Queue, routes)
		prefix := fmt.Sprintf("evt_%d_", time.Now().UnixNano())
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			p := jobs.DeliverPayload{Source: "src", EventID: fmt.Sprint(prefix, i), Destination: "dst"}
			if err := enq.Enqueue(ctx, p); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})

	for _, size := range []int{16, 500} {
		b.Run(fmt.Sprintf("EnqueueEvents/batch=%d", size), func(b *testing.B) {
			r := redistest.New(b)
			enq := jobs.NewEnqueuer(r.Client, r.Queue, routes)
			prefix := fmt.Sprintf("evt_%d_", time.Now().UnixNano())
			refs := make([]dedupe.EventRef, 0, size)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				refs = append(refs, dedupe.EventRef{Source: "src", ExternalID: fmt.Sprint(prefix, i)})
				i++
				if len(refs) == size {
					if _, err := enq.EnqueueEvents(ctx, refs); err != nil {
						b.Fatal(err)
					}
					refs = refs[:0]
				}
			}
		})
	}
}
