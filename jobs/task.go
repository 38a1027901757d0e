package jobs

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-redis/redis_rate/v10"

	"github.com/webhookd/webhookd/internal/glob"
)

// TypeDeliver is the Asynq task type that forwards one event to one
// destination.
const TypeDeliver = "webhookd:deliver"

// DefaultQueue is the Asynq queue webhookd uses unless configured.
const DefaultQueue = "webhookd"

// maxTaskRetry is the Asynq retry limit of every task: high enough never
// to be reached, since job_runs.attempts decides when a run is dead.
const maxTaskRetry = 1 << 20

// DeliverPayload is the payload of a TypeDeliver task. The event itself
// stays in Postgres; the worker reads it when it claims the key.
type DeliverPayload struct {
	Source      string `json:"source"`
	EventID     string `json:"event_id"`
	Destination string `json:"destination"`
	// Generation is 1, or a forced replay's generation (2, 3, …).
	Generation int `json:"generation,omitempty"`
}

// Key returns the job key: <source>:<destination>:<external_id>, with
// #<generation> appended for a forced replay (see [Key]).
func (p DeliverPayload) Key() string {
	return Key(p.Source, p.Destination, p.EventID, p.Generation)
}

// Key returns the job key of an event, destination and generation:
// <source>:<destination>:<external_id>, with #<generation> appended for a
// forced replay (generation 2 and up). It never contains a time, a random
// value or an attempt number.
//
// Distinct arguments give distinct keys. '#' is the escape: a '#' in the
// event id is written "##", so an id ending in "#2" cannot stand for
// generation 2 of another event's key; in the source and destination
// names (which the configuration limits to [a-z0-9_-], so no key changes)
// '#' is written "##" and ':' "#:", so the first two lone ':' separate the
// parts. A ':' in the event id, the last part, needs no escape. Keys of
// ids without '#' are as they always were; migration 0012 re-keyed the
// runs of ids with one.
func Key(source, destination, eventID string, generation int) string {
	k := nameEscaper.Replace(source) + ":" + nameEscaper.Replace(destination) + ":" + idEscaper.Replace(eventID)
	if generation > 1 {
		k += "#" + strconv.Itoa(generation)
	}
	return k
}

// keyPrefix is the start every key of destination's runs shares.
func keyPrefix(source, destination string) string {
	return nameEscaper.Replace(source) + ":" + nameEscaper.Replace(destination) + ":"
}

var (
	nameEscaper = strings.NewReplacer("#", "##", ":", "#:")
	idEscaper   = strings.NewReplacer("#", "##")
)

func (p DeliverPayload) generation() int {
	if p.Generation < 1 {
		return 1
	}
	return p.Generation
}

func decodePayload(b []byte) (DeliverPayload, error) {
	var p DeliverPayload
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("error decoding deliver payload: %w", err)
	}
	if p.Source == "" || p.EventID == "" || p.Destination == "" {
		return p, fmt.Errorf("error decoding deliver payload: source, event_id and destination are required")
	}
	return p, nil
}

// Destination is where an event's work goes.
type Destination struct {
	// Name is unique within its source.
	Name string
	// URL receives POST requests.
	URL string
	// Timeout bounds one call. Defaults to 10s.
	Timeout time.Duration
	// MaxAttempts is how many failed tries make the run dead. Defaults to 20.
	MaxAttempts int
	// Concurrency caps the calls in flight, all workers together; 0 means
	// no cap.
	Concurrency int
	// Rate caps the calls per period, all workers together, with a burst
	// of at most one second's worth; nil means no cap.
	Rate *redis_rate.Limit
	// Circuit stops calling the destination after a run of failed calls.
	Circuit Circuit
	// ForwardHeaders are the canonical names of the sender's headers the
	// destination gets as they came, from those stored with the event:
	// the scheme's (verify.Defaults.ForwardedHeaders) and the
	// configuration's forward_headers. A name the call sets itself
	// (ReservedHeader) is never taken from the sender.
	ForwardHeaders []string
	// Filter, when set, lists the event types the destination wants: an
	// event whose type matches none of them (or that has no type) makes
	// no run for it. nil wants every event.
	Filter glob.Filter
	// SigningSecret, when set, signs forwarded calls with Standard Webhooks
	// headers (webhook-id is the key). It is a Standard Webhooks secret,
	// whsec_<base64>, as verify.SchemeStandard takes it.
	SigningSecret string
}

// Circuit is a destination's circuit breaker (SPEC): after Failures
// failed calls in a row (the outcomes that spend an attempt: 5xx, 408,
// 3xx, timeout, connection error) it is open for Cooldown from the last
// of them, then one call probes it, and a 2xx closes it.
type Circuit struct {
	// Failures opens the circuit. Defaults to 20 unless Disabled.
	Failures int
	// Cooldown is how long it stays open after the last failure. Defaults
	// to 1m.
	Cooldown time.Duration
	// Disabled turns the circuit off (the configuration's failures: 0).
	Disabled bool
}

// WithDefaults returns a copy of d with zero fields set to their defaults.
func (d Destination) WithDefaults() Destination {
	switch {
	case d.Circuit.Disabled:
		d.Circuit.Failures = 0
	case d.Circuit.Failures <= 0:
		d.Circuit.Failures = 20
	}
	if d.Circuit.Cooldown <= 0 {
		d.Circuit.Cooldown = time.Minute
	}
	if d.Timeout <= 0 {
		d.Timeout = 10 * time.Second
	}
	if d.MaxAttempts <= 0 {
		d.MaxAttempts = 20
	}
	return d
}
