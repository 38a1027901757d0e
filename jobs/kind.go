package jobs

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/field"
)

// kind is how a destination's call is made, picked by its URL's scheme
// (SPEC: "Destination kinds"): an HTTP POST, or a publish to a broker
// that takes the key into its own deduplication. Claim, steering,
// ordering, rules, attempts, replay, metrics and tracing are the
// worker's, the same for every kind; a kind only makes the call and
// classifies its outcome as the destination call's table says.
type kind interface {
	call(ctx context.Context, client *http.Client, r callRequest) callResult
	// close closes what the kind holds open (a broker's connection); a
	// call after it fails.
	close()
}

// errRetired is a call to a destination whose kind a reload or shutdown
// closed: the call's task runs again under the routes now in force.
var errRetired = errors.New("the destination was reloaded or the process is stopping")

// newKind builds the kind spec's URL names, checking what it needs.
func newKind(spec DestinationSpec, opts DestinationOptions) (kind, error) {
	isKafka := strings.HasPrefix(spec.URL, kafkaScheme)
	if !isKafka && spec.Topic != "" {
		return nil, field.Errorf("topic", "applies only to a kafka:// destination")
	}
	if !strings.HasPrefix(spec.URL, "http://") && !strings.HasPrefix(spec.URL, "https://") {
		switch {
		case spec.TLS != nil:
			return nil, field.Errorf("tls", "applies only to an http(s) destination")
		case spec.Retry != nil && spec.Retry.RetryOn != nil:
			return nil, field.Errorf("retry.retry_on", "applies only to an http(s) destination: a broker answers no status")
		}
	}
	if isKafka {
		// Several brokers, comma-separated: not one URL's host.
		if spec.Auth != nil || len(spec.Headers) > 0 {
			return nil, field.Errorf("auth", "auth and headers apply only to an http(s) destination")
		}
		return newKafkaKind(spec.URL, spec.Topic)
	}
	u, err := url.Parse(spec.URL)
	if err != nil || u.Host == "" {
		return nil, field.Errorf("url", "must be an absolute URL: http(s)://, nats://, amqp:// or kafka://")
	}
	if u.Scheme != "nats" && spec.Subject != "" {
		return nil, field.Errorf("subject", "applies only to a nats:// destination")
	}
	if u.Scheme != "amqp" && u.Scheme != "amqps" && (spec.Exchange != "" || spec.RoutingKey != "") {
		return nil, field.Errorf("routing_key", "exchange and routing_key apply only to an amqp:// destination")
	}
	switch u.Scheme {
	case "http", "https":
		if err := checkDestinationURL(u, opts.Listen, opts.AllowLinkLocal); err != nil {
			return nil, field.Errorf("url", "%s", err)
		}
		if spec.TLS == nil {
			return httpKind{}, nil
		}
		client, err := newTLSClient(spec.TLS, opts.AllowLinkLocal)
		return httpKind{client: client}, err
	case "nats":
		if spec.Auth != nil || len(spec.Headers) > 0 {
			return nil, field.Errorf("auth", "auth and headers apply only to an http(s) destination")
		}
		return newNATSKind(u, spec.Subject)
	case "amqp", "amqps":
		if spec.Auth != nil || len(spec.Headers) > 0 {
			return nil, field.Errorf("auth", "auth and headers apply only to an http(s) destination")
		}
		return newAMQPKind(u, spec.Exchange, spec.RoutingKey)
	}
	return nil, field.Errorf("url", "scheme %q is not a destination kind: http, https, nats, amqp or kafka", u.Scheme)
}

// httpKind POSTs the event (callDestination), with the handler's client
// or, for a destination with tls:, its own.
type httpKind struct {
	client *http.Client
}

func (k httpKind) call(ctx context.Context, client *http.Client, r callRequest) callResult {
	if k.client != nil {
		client = k.client
	}
	return callDestination(ctx, client, r)
}

// close lets go of a tls: client's idle connections.
func (k httpKind) close() {
	if k.client != nil {
		k.client.CloseIdleConnections()
	}
}

// kindOf is d's kind; a Destination built without NewDestination (a
// test's) is HTTP.
func kindOf(d Destination) kind {
	if d.kind == nil {
		return httpKind{}
	}
	return d.kind
}

// subjectTemplate checks a subject (routing key, topic) template: only
// {source}, {type} and {destination} are replaced.
func subjectTemplate(key, tmpl string) error {
	if tmpl == "" {
		return field.Errorf(key, "required")
	}
	rest := tmpl
	for _, p := range []string{"{source}", "{type}", "{destination}"} {
		rest = strings.ReplaceAll(rest, p, "")
	}
	if strings.ContainsAny(rest, "{}") {
		return &field.Error{Path: key, Err: errors.New("only {source}, {type} and {destination} are replaced")}
	}
	return nil
}

// expandSubject fills a subject template for a call.
func expandSubject(tmpl string, r callRequest) string {
	return strings.NewReplacer("{source}", r.source, "{type}", r.eventType, "{destination}", r.dest.Name).Replace(tmpl)
}

// unavailable is the outcome of a broker that could not be reached or
// refused the message: a failed attempt, like a 5xx. The error never
// shows the URL's credentials.
func unavailable(r callRequest, what string, err error) callResult {
	return callResult{outcome: dedupe.OutcomeRetry, err: what + ": " + describeCallError(err, r.dest.URL)}
}
