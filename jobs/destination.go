package jobs

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/webhookd/webhookd/gateway/eventid"
	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/field"
	"github.com/webhookd/webhookd/internal/glob"
)

// Defaults of a destination's spec, applied by NewDestination where the
// spec leaves a field zero.
const (
	// DefaultTimeout bounds one call.
	DefaultTimeout = 10 * time.Second
	// DefaultMaxAttempts is how many failed tries make a run dead.
	DefaultMaxAttempts = 20
	// DefaultCircuitFailures is how many failed calls in a row open the
	// circuit (SPEC).
	DefaultCircuitFailures = 20
	// DefaultCircuitCooldown is how long an open circuit stays open after
	// its last failure (SPEC).
	DefaultCircuitCooldown = time.Minute
)

// DestinationSpec is a destination as configured (the YAML keys of a
// source's `destinations:` list). NewDestination checks and builds it.
type DestinationSpec struct {
	// Name is unique within its source, [a-z0-9_-]+. Required.
	Name string `yaml:"name"`
	// URL receives POST requests: an absolute http(s) URL. Required.
	URL string `yaml:"url"`
	// Timeout bounds one call; shorter than the lease. Defaults to
	// DefaultTimeout.
	Timeout time.Duration `yaml:"timeout"`
	// MaxAttempts is how many failed tries make the run dead. Defaults to
	// DefaultMaxAttempts.
	MaxAttempts int `yaml:"max_attempts"`
	// SigningSecret, when set, signs forwarded calls with Standard
	// Webhooks headers: a whsec_<base64> secret.
	SigningSecret string `yaml:"signing_secret"`
	// RateLimit is "N/s" or "N/m": at most N calls per second or minute,
	// all workers together. Empty means no limit.
	RateLimit string `yaml:"rate_limit"`
	// Concurrency caps the calls in flight, all workers together; 0 means
	// no cap.
	Concurrency int `yaml:"concurrency"`
	// FairBy names a value of each event (json:<path> or header:<Name>:
	// a tenant, a shop) among which the destination's concurrency and
	// rate limit are shared fairly: while several values have calls
	// waiting, none takes more than its share of the slots or of the
	// rate. Needs Concurrency or RateLimit. Empty: first come, first
	// served.
	FairBy string `yaml:"fair_by"`
	// Circuit tunes the circuit breaker; nil keeps its defaults.
	Circuit *CircuitSpec `yaml:"circuit"`
	// Filter lists the event types (globs) the destination wants; nil
	// wants every event, an empty list is an error.
	Filter []string `yaml:"filter"`
	// ForwardHeaders are request headers forwarded besides the scheme's.
	ForwardHeaders []string `yaml:"forward_headers"`
	// Subject is a nats:// destination's subject; {source}, {type} and
	// {destination} are replaced.
	Subject string `yaml:"subject"`
	// Exchange and RoutingKey are an amqp:// destination's exchange
	// ("" is the default exchange) and routing key ({source}, {type} and
	// {destination} are replaced).
	Exchange   string `yaml:"exchange"`
	RoutingKey string `yaml:"routing_key"`
	// Topic is a kafka:// destination's topic ({source}, {type} and
	// {destination} are replaced).
	Topic string `yaml:"topic"`
	// Headers are static headers every HTTP call carries.
	Headers map[string]string `yaml:"headers"`
	// Auth is an HTTP destination's credentials.
	Auth *AuthSpec `yaml:"auth"`
	// TLS is an HTTP destination's CA and client certificate.
	TLS *TLSSpec `yaml:"tls"`
	// Retry is the destination's own retry policy; nil keeps the global
	// backoff and the default statuses.
	Retry *RetrySpec `yaml:"retry"`
	// SigningSecrets sign with each (Standard Webhooks: one v1 signature
	// per secret) while the receiver rotates; beside SigningSecret.
	SigningSecrets []string `yaml:"signing_secrets"`
	// When is a CEL expression over event and body (rules.go): an event
	// it rejects is not sent (its run is filtered). Empty sends every
	// event the filter wants.
	When string `yaml:"when"`
	// Transform is a CEL expression building the JSON body sent instead
	// of the raw one. Empty sends the raw body.
	Transform string `yaml:"transform"`
}

// CircuitSpec is a destination's circuit breaker as configured.
type CircuitSpec struct {
	// Failures opens the circuit after this many failed calls in a row;
	// 0 turns it off. nil means DefaultCircuitFailures.
	Failures *int `yaml:"failures"`
	// Cooldown is how long it stays open after the last failure. Defaults
	// to DefaultCircuitCooldown.
	Cooldown time.Duration `yaml:"cooldown"`
}

// DestinationOptions is what NewDestination needs to know of the rest of
// the configuration.
type DestinationOptions struct {
	// Scheme is the source's verify scheme (its forwarded headers).
	Scheme string
	// Lease is the process's lease: a call must end within it.
	Lease time.Duration
	// SourceHasEventType says the source extracts an event type, without
	// which a filter would filter out every event.
	SourceHasEventType bool
	// Listen is the process's listen address: no destination may call it.
	Listen string
	// AllowLinkLocal lets a URL name a link-local or metadata address.
	AllowLinkLocal bool
	// Order is the source's ordering of an entity's events.
	Order OrderPolicy
}

// OrderPolicy is how a destination orders an entity's events (the
// source's order: mode and on_failure).
type OrderPolicy struct {
	// FIFO calls an entity's events one at a time, in order: an event
	// waits (held, "order") while an earlier one of its entity is not
	// settled for the destination.
	FIFO bool
	// HoldOnFailure keeps an entity's later events waiting behind a
	// failed or dead one; else that one counts as settled.
	HoldOnFailure bool
	// ReorderWindow is how long an event waits, after it was recorded,
	// for an earlier version of its entity that may still arrive (held,
	// "order: reorder window"); 0 waits for none.
	ReorderWindow time.Duration
}

// Destination is where an event's work goes: a DestinationSpec checked,
// with its defaults applied and what each call needs built once.
type Destination struct {
	// Name is unique within its source.
	Name string
	// URL receives POST requests.
	URL string
	// Timeout bounds one call.
	Timeout time.Duration
	// MaxAttempts is how many failed tries make the run dead.
	MaxAttempts int
	// Concurrency caps the calls in flight, all workers together; 0 means
	// no cap.
	Concurrency int
	// FairBy, when set, reads the value each event's calls share
	// Concurrency and Rate by (DestinationSpec.FairBy).
	FairBy *eventid.Extractor
	// Rate caps the calls per period, all workers together: each call
	// takes its own turn, one interval after the last (Steering), so no
	// period holds more than the rate and one; nil means no cap.
	Rate *Rate
	// Retry says when a failed call is tried again and which statuses
	// are worth it.
	Retry RetryPolicy
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
	// Signer, when set, signs forwarded calls with Standard Webhooks
	// headers (webhook-id is the key), built once from signing_secret.
	Signer verify.Signer
	// Rules are the compiled when and transform; nil when neither is set.
	Rules *Rules
	// Order is how the destination orders an entity's events.
	Order OrderPolicy
	// Headers are static headers every HTTP call carries.
	Headers map[string]string
	// Auth, when set, is the credential every HTTP call carries.
	Auth *httpAuth
	// kind makes the call: an HTTP POST, or a broker's publish.
	kind kind
}

// Circuit is a destination's circuit breaker (SPEC): after Failures
// failed calls in a row (the outcomes that spend an attempt: 5xx, 408,
// 3xx, timeout, connection error) it is open for Cooldown from the last
// of them, then one call probes it, and a 2xx closes it.
type Circuit struct {
	// Failures opens the circuit; 0 when Disabled.
	Failures int
	// Cooldown is how long it stays open after the last failure.
	Cooldown time.Duration
	// Disabled turns the circuit off (the configuration's failures: 0).
	Disabled bool
}

// Bounds past which a destination's value is a mistake, not a choice.
const (
	maxMaxAttempts = 1000
	maxConcurrency = 100_000
)

// nameRE is what source and destination names look like: they are parts
// of keys, URLs and metric labels.
var nameRE = regexp.MustCompile(`^[a-z0-9_-]+$`)

// CheckName returns an error unless name is a valid source or destination
// name, [a-z0-9_-]+.
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%q must match [a-z0-9_-]+", name)
	}
	return nil
}

// NewDestination checks spec and builds its Destination, defaults
// applied. Every problem is reported, joined, as a *field.Error whose
// path is the spec's key ("url", "circuit.failures").
func NewDestination(spec DestinationSpec, opts DestinationOptions) (Destination, error) {
	d := Destination{
		Name: spec.Name, URL: spec.URL, Timeout: spec.Timeout, MaxAttempts: spec.MaxAttempts, Concurrency: spec.Concurrency,
		ForwardHeaders: ForwardedHeaders(opts.Scheme, spec.ForwardHeaders),
		Circuit:        Circuit{Failures: DefaultCircuitFailures, Cooldown: DefaultCircuitCooldown},
		Order:          opts.Order,
	}
	var errs []error
	add := func(path, format string, args ...any) { errs = append(errs, field.Errorf(path, format, args...)) }
	if err := CheckName(spec.Name); err != nil {
		add("name", "%s", err)
	}
	k, err := newKind(spec, opts)
	errs = append(errs, err)
	d.kind = k
	switch {
	case spec.Timeout < 0:
		add("timeout", "must not be negative")
	case spec.Timeout == 0:
		d.Timeout = DefaultTimeout
	}
	if opts.Lease > 0 && d.Timeout >= opts.Lease {
		add("timeout", "must be shorter than lease")
	}
	switch {
	case spec.MaxAttempts < 0:
		add("max_attempts", "must be positive")
	case spec.MaxAttempts > maxMaxAttempts:
		add("max_attempts", "must be at most %d", maxMaxAttempts)
	case spec.MaxAttempts == 0:
		d.MaxAttempts = DefaultMaxAttempts
	}
	switch {
	case spec.Concurrency < 0:
		add("concurrency", "must not be negative")
	case spec.Concurrency > maxConcurrency:
		add("concurrency", "must be at most %d", maxConcurrency)
	}
	if spec.FairBy != "" {
		x, err := eventid.Parse(spec.FairBy)
		switch {
		case err == nil && spec.FairBy == "body-sha256":
			add("fair_by", "want json:<path> or header:<Name> (a tenant is never a hash)")
		case err != nil:
			add("fair_by", "%s", err)
		case spec.Concurrency == 0 && spec.RateLimit == "":
			add("fair_by", "shares the destination's concurrency and rate_limit: set one")
		}
		d.FairBy = &x
	}
	if spec.RateLimit != "" {
		rate, err := parseRate(spec.RateLimit)
		if err != nil {
			add("rate_limit", "%s", err)
		}
		d.Rate = &rate
	}
	if c := spec.Circuit; c != nil {
		if c.Failures != nil {
			if *c.Failures < 0 {
				add("circuit.failures", "must not be negative (0 turns the circuit off)")
			}
			d.Circuit.Failures, d.Circuit.Disabled = max(*c.Failures, 0), *c.Failures == 0
		}
		switch {
		case c.Cooldown < 0:
			add("circuit.cooldown", "must not be negative")
		case c.Cooldown > 0:
			d.Circuit.Cooldown = c.Cooldown
		}
	}
	for i, name := range spec.ForwardHeaders {
		switch {
		case !httpguts.ValidHeaderFieldName(name):
			add(field.Index("forward_headers", i), "%q is not a header name", name)
		case ReservedHeader(name):
			add(field.Index("forward_headers", i), "%s is set by webhookd itself and cannot be forwarded", name)
		}
	}
	if spec.Filter != nil {
		f, err := glob.CompileFilter(spec.Filter)
		if err != nil {
			add("filter", "%s", err)
		} else if !opts.SourceHasEventType {
			add("filter", "the source has no event type (scheme %s names none): set its event_type, or every event would be filtered out", opts.Scheme)
		}
		d.Filter = f
	}
	rules, err := CompileRules(spec.When, spec.Transform)
	errs = append(errs, err)
	d.Rules = rules
	for name := range spec.Headers {
		switch {
		case !httpguts.ValidHeaderFieldName(name):
			add("headers", "%q is not a header name", name)
		case ReservedHeader(name):
			add("headers", "%s is set by webhookd itself", name)
		case !httpguts.ValidHeaderFieldValue(spec.Headers[name]):
			add("headers", "%s: the value holds a character a header cannot carry", name)
		}
	}
	d.Headers = spec.Headers
	auth, err := newHTTPAuth(spec.Auth)
	errs = append(errs, err)
	d.Auth = auth
	retry, err := newRetryPolicy(spec.Retry)
	errs = append(errs, err)
	d.Retry = retry
	if secrets := signingSecrets(spec); len(secrets) > 0 {
		s, err := verify.NewSigner(verify.Config{Scheme: verify.SchemeStandard, Secrets: secrets})
		if err != nil {
			add("signing_secrets", "each must be a Standard Webhooks secret, whsec_ followed by base64")
		}
		d.Signer = s
	}
	return d, errors.Join(errs...)
}

// rateRE is a rate_limit: a positive count per second or minute.
var rateRE = regexp.MustCompile(`^([1-9][0-9]{0,8})/(s|m)$`)

// Rate is a rate_limit: at most N calls per Period, all workers
// together, spaced by Period/N, so no window of one period holds more
// than N + 1 of them (SPEC); no burst on top of the steady rate.
type Rate struct {
	N      int
	Period time.Duration
}

// parseRate reads a rate_limit: "50/s" or "600/m".
func parseRate(v string) (Rate, error) {
	m := rateRE.FindStringSubmatch(strings.TrimSpace(v))
	if m == nil {
		return Rate{}, fmt.Errorf("%q is not a rate: write N/s or N/m, e.g. 50/s", v)
	}
	n, _ := strconv.Atoi(m[1])
	if m[2] == "m" {
		return Rate{N: n, Period: time.Minute}, nil
	}
	return Rate{N: n, Period: time.Second}, nil
}

// String writes r as configured: "50/s", "600/m".
func (r Rate) String() string {
	if r.Period == time.Minute {
		return fmt.Sprintf("%d/m", r.N)
	}
	return fmt.Sprintf("%d/s", r.N)
}

// interval is the time between two calls' turns.
func (r Rate) interval() time.Duration { return r.Period / time.Duration(max(r.N, 1)) }

// signingSecrets are the secrets a destination's calls are signed with:
// signing_secret, then signing_secrets.
func signingSecrets(spec DestinationSpec) []string {
	var out []string
	if spec.SigningSecret != "" {
		out = append(out, spec.SigningSecret)
	}
	return append(out, spec.SigningSecrets...)
}
