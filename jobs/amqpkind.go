package jobs

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/webhookd/webhookd/dedupe"
)

// amqpKind publishes to RabbitMQ (amqp://user:pass@host:5672/vhost +
// exchange and routing_key): persistent, mandatory (a message no queue
// takes comes back and is a failed attempt), done when the broker
// confirms it. The key is the message's message_id, for the consumer's
// own deduplication.
type amqpKind struct {
	url, exchange, routingKey string

	mu     sync.Mutex
	conn   *amqp.Connection
	closed bool
	// idle holds open channels in confirm mode, each used by one call at
	// a time, so a returned message is that call's.
	idle chan *amqpChannel
}

type amqpChannel struct {
	ch      *amqp.Channel
	returns chan amqp.Return
}

func newAMQPKind(u *url.URL, exchange, routingKey string) (*amqpKind, error) {
	if err := subjectTemplate("routing_key", routingKey); err != nil {
		return nil, err
	}
	return &amqpKind{url: u.String(), exchange: exchange, routingKey: routingKey, idle: make(chan *amqpChannel, 32)}, nil
}

// channel takes an idle channel or opens one (dialling on first use, and
// again after the connection closed).
func (k *amqpKind) channel() (*amqpChannel, error) {
	for len(k.idle) > 0 {
		select {
		case c := <-k.idle:
			if !c.ch.IsClosed() {
				return c, nil
			}
		default: // another call took it
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil, errRetired
	}
	if k.conn == nil || k.conn.IsClosed() {
		conn, err := amqp.DialConfig(k.url, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second), Properties: amqp.Table{"connection_name": "webhookd"}})
		if err != nil {
			return nil, err
		}
		k.conn = conn
	}
	ch, err := k.conn.Channel()
	if err != nil {
		return nil, err
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, err
	}
	return &amqpChannel{ch: ch, returns: ch.NotifyReturn(make(chan amqp.Return, 1))}, nil
}

// release puts c back for the next call, or closes it when it is not
// reusable.
func (k *amqpKind) release(c *amqpChannel, ok bool) {
	if ok {
		select {
		case k.idle <- c:
			return
		default:
		}
	}
	_ = c.ch.Close()
}

// close closes the connection, and with it every channel.
func (k *amqpKind) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closed = true
	if k.conn != nil {
		_ = k.conn.Close()
	}
}

// amqpResult is a done run's stored result for a RabbitMQ publish.
type amqpResult struct {
	Exchange   string  `json:"exchange"`
	RoutingKey string  `json:"routing_key"`
	DurationMS float64 `json:"duration_ms"`
}

func (k *amqpKind) call(ctx context.Context, _ *http.Client, r callRequest) callResult {
	ctx, cancel := context.WithTimeout(ctx, r.dest.Timeout)
	defer cancel()
	c, err := k.channel()
	if err != nil {
		return unavailable(r, "amqp: connect", err)
	}
	h, err := callHeaders(ctx, r)
	if err != nil {
		k.release(c, true)
		return callResult{outcome: dedupe.OutcomePermanent, err: err.Error()}
	}
	headers := amqp.Table{}
	for name, vs := range h {
		if len(vs) > 0 && name != "Content-Type" {
			headers[name] = vs[0]
		}
	}
	key := expandSubject(k.routingKey, r)
	start := time.Now()
	dc, err := c.ch.PublishWithDeferredConfirmWithContext(ctx, k.exchange, key, true, false, amqp.Publishing{
		Headers: headers, ContentType: r.contentType, DeliveryMode: amqp.Persistent, MessageId: r.key,
		Timestamp: r.now, Body: r.body,
	})
	if err != nil {
		k.release(c, false)
		res := unavailable(r, "amqp: publish", err)
		res.called, res.duration = true, time.Since(start)
		return res
	}
	acked, err := dc.WaitContext(ctx)
	d := time.Since(start)
	if err != nil {
		k.release(c, false)
		return callResult{outcome: dedupe.OutcomeRetry, called: true, duration: d,
			err: "amqp: the broker did not confirm within " + r.dest.Timeout.String()}
	}
	// The broker returns a mandatory message no queue takes before it
	// confirms it.
	select {
	case ret := <-c.returns:
		k.release(c, true)
		return callResult{outcome: dedupe.OutcomeRetry, called: true, duration: d,
			err: "amqp: no queue takes routing key " + key + " on exchange " + quoteExchange(k.exchange) + ": " + ret.ReplyText}
	default:
	}
	k.release(c, true)
	if !acked {
		return callResult{outcome: dedupe.OutcomeRetry, called: true, duration: d, err: "amqp: the broker refused the message (nack)"}
	}
	result, _ := json.Marshal(amqpResult{Exchange: k.exchange, RoutingKey: key, DurationMS: float64(d.Microseconds()) / 1000})
	return callResult{outcome: dedupe.OutcomeDone, called: true, duration: d, result: result}
}

// quoteExchange names an exchange in a message; the default one has no
// name.
func quoteExchange(name string) string {
	if name == "" {
		return "(default)"
	}
	return name
}
