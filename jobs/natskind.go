package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/webhookd/webhookd/dedupe"
)

// natsKind publishes to NATS JetStream (nats://host:4222 + subject): the
// call is done when the stream acknowledges the message; the key is the
// message's Nats-Msg-Id, so within the stream's duplicate window a repeat
// (a worker killed after publishing, before the outcome was stored) is
// dropped by the stream itself.
type natsKind struct {
	url     string
	subject string

	mu     sync.Mutex
	nc     *nats.Conn
	js     jetstream.JetStream
	closed bool
}

func newNATSKind(u *url.URL, subject string) (*natsKind, error) {
	if err := subjectTemplate("subject", subject); err != nil {
		return nil, err
	}
	return &natsKind{url: u.String(), subject: subject}, nil
}

// conn connects on first use (a configuration check must not need the
// broker), and again after the connection closed for good.
func (k *natsKind) conn() (jetstream.JetStream, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil, errRetired
	}
	if k.nc != nil && !k.nc.IsClosed() {
		return k.js, nil
	}
	nc, err := nats.Connect(k.url, nats.Name("webhookd"), nats.Timeout(5*time.Second), nats.MaxReconnects(-1))
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	k.nc, k.js = nc, js
	return js, nil
}

func (k *natsKind) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closed = true
	if k.nc != nil {
		k.nc.Close()
	}
}

// natsResult is a done run's stored result for a NATS publish: where
// the stream put the message, and whether it was a repeat it dropped.
type natsResult struct {
	Stream     string  `json:"stream"`
	Sequence   uint64  `json:"sequence"`
	Duplicate  bool    `json:"duplicate,omitempty"`
	DurationMS float64 `json:"duration_ms"`
}

func (k *natsKind) call(ctx context.Context, _ *http.Client, r callRequest) callResult {
	ctx, cancel := context.WithTimeout(ctx, r.dest.Timeout)
	defer cancel()
	js, err := k.conn()
	if err != nil {
		return unavailable(r, "nats: connect", err)
	}
	h, err := callHeaders(ctx, r)
	if err != nil {
		return callResult{outcome: dedupe.OutcomePermanent, err: err.Error()}
	}
	msg := nats.NewMsg(expandSubject(k.subject, r))
	msg.Data = r.body
	for name, vs := range h {
		msg.Header[name] = vs
	}
	start := time.Now()
	ack, err := js.PublishMsg(ctx, msg, jetstream.WithMsgID(r.key))
	d := time.Since(start)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return callResult{outcome: dedupe.OutcomeRetry, called: true, duration: d,
			err: "nats: the stream did not acknowledge within " + r.dest.Timeout.String()}
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		return callResult{outcome: dedupe.OutcomeRetry, called: true, duration: d,
			err: "nats: no stream takes subject " + msg.Subject}
	case err != nil:
		res := unavailable(r, "nats: publish", err)
		res.called, res.duration = true, d
		return res
	}
	result, _ := json.Marshal(natsResult{Stream: ack.Stream, Sequence: ack.Sequence, Duplicate: ack.Duplicate,
		DurationMS: float64(d.Microseconds()) / 1000})
	return callResult{outcome: dedupe.OutcomeDone, called: true, duration: d, result: result}
}
