package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/field"
)

// kafkaKind produces to Kafka (kafka://host:9092,host2:9092 + topic)
// with franz-go's idempotent producer and acks=all: done when every
// in-sync replica has the record. The key travels as the Idempotency-Key
// header; the record key is the entity when the source orders events (so
// an entity's records share a partition, in order), else the key.
type kafkaKind struct {
	brokers []string
	topic   string

	mu     sync.Mutex
	client *kgo.Client
	closed bool
}

// kafkaScheme prefixes a Kafka destination's URL.
const kafkaScheme = "kafka://"

func newKafkaKind(rawURL, topic string) (*kafkaKind, error) {
	var brokers []string
	for b := range strings.SplitSeq(strings.TrimPrefix(rawURL, kafkaScheme), ",") {
		b = strings.TrimSpace(strings.TrimSuffix(b, "/"))
		if b == "" || strings.ContainsAny(b, "/@?#") {
			return nil, field.Errorf("url", "must be kafka://host:port[,host:port…]")
		}
		brokers = append(brokers, b)
	}
	if err := subjectTemplate("topic", topic); err != nil {
		return nil, err
	}
	return &kafkaKind{brokers: brokers, topic: topic}, nil
}

// producer makes the client on first use (a configuration check must not
// need the brokers); a record not delivered within timeout (the
// destination's) is failed, with those behind it.
func (k *kafkaKind) producer(timeout time.Duration) (*kgo.Client, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil, errRetired
	}
	if k.client != nil {
		return k.client, nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.brokers...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0), kgo.ClientID("webhookd"), kgo.RecordDeliveryTimeout(timeout))
	if err != nil {
		return nil, err
	}
	k.client = cl
	return cl, nil
}

// produce produces rec and waits for the cluster's acknowledgement
// until ctx ends. Not ProduceSync: a record in flight to a broker that
// went away is not given up before the connection is (the idempotent
// producer keeps its sequence gapless), and a call must end within its
// timeout (SPEC: one that never confirms is a timeout). Such a record
// may still be delivered later, beside the retry's: a repeat under the
// same Idempotency-Key, for the consumer to drop.
func (k *kafkaKind) produce(ctx context.Context, cl *kgo.Client, rec *kgo.Record) (*kgo.Record, error) {
	acked := make(chan error, 1)
	cl.Produce(ctx, rec, func(_ *kgo.Record, err error) { acked <- err })
	select {
	case err := <-acked:
		return rec, err
	case <-ctx.Done():
		return rec, ctx.Err()
	}
}

// close flushes nothing (every call waits for its record) and closes
// the client.
func (k *kafkaKind) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closed = true
	if k.client != nil {
		k.client.Close()
	}
}

// kafkaResult is a done run's stored result for a Kafka record.
type kafkaResult struct {
	Topic      string  `json:"topic"`
	Partition  int32   `json:"partition"`
	Offset     int64   `json:"offset"`
	DurationMS float64 `json:"duration_ms"`
}

func (k *kafkaKind) call(ctx context.Context, _ *http.Client, r callRequest) callResult {
	ctx, cancel := context.WithTimeout(ctx, r.dest.Timeout)
	defer cancel()
	cl, err := k.producer(r.dest.Timeout)
	if err != nil {
		return unavailable(r, "kafka: client", err)
	}
	h, err := callHeaders(ctx, r)
	if err != nil {
		return callResult{outcome: dedupe.OutcomePermanent, err: err.Error()}
	}
	rec := &kgo.Record{Topic: expandSubject(k.topic, r), Key: []byte(r.key), Value: r.body, Timestamp: r.now}
	if r.entity != "" {
		rec.Key = []byte(r.entity)
	}
	for name, vs := range h {
		for _, v := range vs {
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: name, Value: []byte(v)})
		}
	}
	start := time.Now()
	rec, err = k.produce(ctx, cl, rec)
	d := time.Since(start)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return callResult{outcome: dedupe.OutcomeRetry, called: true, duration: d,
			err: "kafka: not acknowledged by every in-sync replica within " + r.dest.Timeout.String()}
	case err != nil:
		res := unavailable(r, "kafka: produce", err)
		res.called, res.duration = true, d
		return res
	}
	result, _ := json.Marshal(kafkaResult{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset,
		DurationMS: float64(d.Microseconds()) / 1000})
	return callResult{outcome: dedupe.OutcomeDone, called: true, duration: d, result: result}
}
