package webhookd

import (
	"errors"
	"fmt"
	"time"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway"
	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/field"
	"github.com/webhookd/webhookd/jobs"
)

// SourceSpec is one configured source, a `sources:` entry: its name, how
// it receives (gateway.SourceSpec) and where its events go.
type SourceSpec struct {
	// Name is the :source path segment, [a-z0-9_-]+, unique. Required.
	Name string `yaml:"name"`
	// SourceSpec is how the source receives.
	gateway.SourceSpec `yaml:",inline"`
	// Destinations are where its events go (a configuration file names at
	// least one).
	Destinations []jobs.DestinationSpec `yaml:"destinations"`
}

// SourcesOptions is what NewSources needs to know of the process.
type SourcesOptions struct {
	// Lease bounds every destination's timeout. Defaults to
	// dedupe.DefaultLease.
	Lease time.Duration
	// Retention bounds every duplicate_content_window. Defaults to
	// dedupe.DefaultRetention.
	Retention time.Duration
	// Listen is the process's listen address, which no destination may
	// call.
	Listen string
	// AllowLinkLocalDestinations lets a destination name a link-local or
	// metadata address.
	AllowLinkLocalDestinations bool
}

// Sources is the configured sources built once, at start (and at each
// reload): what the gateway receives and where the worker sends, from the
// specs they came from. The gateway, the hand-off, recovery, replay and
// admin all read these; nothing builds them twice.
type Sources struct {
	// Gateway holds each source as the gateway receives it, by name.
	Gateway gateway.Sources
	// Routes holds each source's destinations, by name.
	Routes jobs.Routes
	// Specs are the specs, in configuration order.
	Specs []SourceSpec
}

// NewSources checks specs and builds them. Every problem is reported,
// joined, as a *field.Error whose path starts at the list
// ("sources[1].destinations[0].url").
func NewSources(specs []SourceSpec, opts SourcesOptions) (*Sources, error) {
	opts = opts.withDefaults()
	out := &Sources{Gateway: make(gateway.Sources, len(specs)), Routes: make(jobs.Routes, len(specs)), Specs: specs}
	var errs []error
	for i, spec := range specs {
		path := field.Index("sources", i)
		if err := jobs.CheckName(spec.Name); err != nil {
			errs = append(errs, &field.Error{Path: path + ".name", Err: err})
		} else if _, dup := out.Routes[spec.Name]; dup {
			errs = append(errs, field.Errorf(path+".name", "duplicate source name %q", spec.Name))
			continue
		}
		dests, err := newRoutes(spec, opts)
		errs = append(errs, field.Prefix(path, err))
		out.Routes[spec.Name] = dests
		var forward []string
		for _, d := range spec.Destinations {
			forward = append(forward, d.ForwardHeaders...)
		}
		name := spec.Name
		src, err := gateway.NewSource(spec.SourceSpec, gateway.SourceOptions{
			Retention:      opts.Retention,
			PlanFunc:       func(eventType string) []string { return out.Routes.Plan(name, eventType) },
			ForwardHeaders: forward,
		})
		errs = append(errs, field.Prefix(path, err))
		out.Gateway[spec.Name] = src
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// newRoutes builds a source's destinations, each name once.
func newRoutes(spec SourceSpec, opts SourcesOptions) (map[string]jobs.Destination, error) {
	dopts := jobs.DestinationOptions{
		Scheme: spec.Verify.Scheme, Lease: opts.Lease, SourceHasEventType: spec.hasEventType(),
		Listen: opts.Listen, AllowLinkLocal: opts.AllowLinkLocalDestinations,
	}
	if o := spec.Order; o != nil && o.Mode == gateway.OrderFIFO {
		dopts.Order = jobs.OrderPolicy{FIFO: true, HoldOnFailure: o.OnFailure == gateway.OrderHold, ReorderWindow: o.ReorderWindow}
	}
	dests := make(map[string]jobs.Destination, len(spec.Destinations))
	var errs []error
	for j, ds := range spec.Destinations {
		path := field.Index("destinations", j)
		if _, dup := dests[ds.Name]; dup {
			errs = append(errs, field.Errorf(path+".name", "duplicate destination name %q", ds.Name))
			continue
		}
		d, err := jobs.NewDestination(ds, dopts)
		errs = append(errs, field.Prefix(path, err))
		dests[ds.Name] = d
	}
	return dests, errors.Join(errs...)
}

// hasEventType reports whether the source extracts an event type: its
// own event_type or its scheme's default.
func (s SourceSpec) hasEventType() bool {
	return s.EventType != "" || verify.SchemeDefaults(s.Verify.Scheme).EventType != ""
}

// Spec returns the spec of the named source.
func (s *Sources) Spec(name string) (SourceSpec, error) {
	for _, spec := range s.Specs {
		if spec.Name == name {
			return spec, nil
		}
	}
	return SourceSpec{}, fmt.Errorf("%w: %q", jobs.ErrUnknownSource, name)
}

func (o SourcesOptions) withDefaults() SourcesOptions {
	if o.Lease <= 0 {
		o.Lease = dedupe.DefaultLease
	}
	if o.Retention <= 0 {
		o.Retention = dedupe.DefaultRetention
	}
	return o
}
