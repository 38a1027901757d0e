package jobs_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/testkit/natstest"
	"github.com/webhookd/webhookd/jobs"
)

// kindReceiver is a destination of one kind for BenchmarkDestinationKinds:
// its spec, and how many messages it holds per key once the runs are done.
type kindReceiver struct {
	spec jobs.DestinationSpec
	held func() map[string]int
}

// BenchmarkDestinationKinds delivers b.N recorded events end to end
// through each kind — hand-off, claim, call or publish, outcome stored —
// with one worker (Asynq concurrency 8) on the test's Postgres schema and
// Redis, and reports events/s; it fails unless the receiver holds each
// key exactly once. Receivers: an httptest server; a nats-server of its
// own with JetStream (file store); the RabbitMQ on 127.0.0.1:5672 (a
// durable queue); Kafka is franz-go's kfake (3 brokers, in process).
// Run with -benchtime=Nx: one iteration is one event.
func BenchmarkDestinationKinds(b *testing.B) {
	for _, k := range []struct {
		name string
		make func(b *testing.B) kindReceiver
	}{
		{"http", httpReceiver},
		{"nats", natsReceiver},
		{"amqp", amqpReceiver},
		{"kafka", kafkaReceiver},
	} {
		b.Run(k.name, func(b *testing.B) {
			recv := k.make(b)
			bd := setup(b, handlerOptions{dest: recv.spec, logger: slog.New(slog.DiscardHandler)})
			events := make([]dedupe.Event, b.N)
			refs := make([]dedupe.EventRef, b.N)
			for i := range b.N {
				id := fmt.Sprintf("evt_%d", i)
				events[i] = dedupe.Event{Source: "src", ExternalID: id, ContentType: "application/json", Payload: []byte(fmt.Sprintf(`{"id":%q}`, id))}
				refs[i] = dedupe.EventRef{Source: "src", ExternalID: id}
			}
			for i := 0; i < b.N; i += 500 {
				if _, err := dedupe.RecordBatch(testCtx(b), bd.schema.Pool, events[i:min(i+500, b.N)]); err != nil {
					b.Fatal(err)
				}
			}
			q := bd.startWorker(b)
			b.ResetTimer()
			start := time.Now()
			if _, err := q.enqueuer.EnqueueEvents(testCtx(b), refs); err != nil {
				b.Fatal(err)
			}
			for bd.schema.Int(b, `SELECT count(*) FROM job_runs WHERE status = 'done'`) < b.N {
				if time.Since(start) > 5*time.Minute {
					b.Fatal("not every run done within 5 minutes")
				}
				time.Sleep(20 * time.Millisecond)
			}
			took := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/took.Seconds(), "events/s")
			held := recv.held()
			for key, n := range held {
				if n != 1 {
					b.Fatalf("%s held %d times", key, n)
				}
			}
			if len(held) != b.N {
				b.Fatalf("the receiver holds %d keys, want %d", len(held), b.N)
			}
		})
	}
}

func httpReceiver(b *testing.B) kindReceiver {
	var (
		mu   sync.Mutex
		keys = map[string]int{}
	)
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys[r.Header.Get("Idempotency-Key")]++
		mu.Unlock()
	}))
	b.Cleanup(srv.Close)
	return kindReceiver{spec: jobs.DestinationSpec{URL: srv.URL}, held: func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return keys
	}}
}

func natsReceiver(b *testing.B) kindReceiver {
	srv := natstest.New(b)
	st := natsStream(b, srv)
	return kindReceiver{spec: jobs.DestinationSpec{URL: srv.URL, Subject: "events.{source}"}, held: func() map[string]int {
		info, err := st.Info(testCtx(b))
		if err != nil {
			b.Fatal(err)
		}
		keys := map[string]int{}
		for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
			m, err := st.GetMsg(testCtx(b), seq)
			if err != nil {
				b.Fatal(err)
			}
			keys[m.Header.Get("Nats-Msg-Id")]++
		}
		return keys
	}}
}

func amqpReceiver(b *testing.B) kindReceiver {
	ch, queue := testQueue(b)
	return kindReceiver{spec: jobs.DestinationSpec{URL: amqpURL, RoutingKey: queue}, held: func() map[string]int {
		keys := map[string]int{}
		for {
			m, ok, err := ch.Get(queue, true)
			if err != nil {
				b.Fatal(err)
			}
			if !ok {
				return keys
			}
			keys[m.MessageId]++
		}
	}}
}

func kafkaReceiver(b *testing.B) kindReceiver {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "webhooks.src"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cluster.Close)
	return kindReceiver{spec: jobs.DestinationSpec{URL: "kafka://" + strings.Join(cluster.ListenAddrs(), ","), Topic: "webhooks.{source}"},
		held: func() map[string]int {
			consumer, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics("webhooks.src"),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			if err != nil {
				b.Fatal(err)
			}
			defer consumer.Close()
			keys := map[string]int{}
			// Read until a second passes without a record.
			for {
				ctx, cancel := context.WithTimeout(testCtx(b), time.Second)
				fetches := consumer.PollFetches(ctx)
				cancel()
				n := 0
				fetches.EachRecord(func(r *kgo.Record) { keys[string(r.Key)]++; n++ })
				if n == 0 {
					return keys
				}
			}
		}}
}
