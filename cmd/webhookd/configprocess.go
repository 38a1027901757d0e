package main

// From the config file to what the process runs: webhookd.Config, the
// gateway's sources and the worker's routes.

import (
	"net/http"
	"slices"
	"time"

	"github.com/webhookd/webhookd"
	"github.com/webhookd/webhookd/gateway"
	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/glob"
	"github.com/webhookd/webhookd/jobs"
)

func (s sourceConf) verifyConfig() verify.Config {
	v := s.Verify
	return verify.Config{
		Scheme:          v.Scheme,
		Secrets:         v.Secrets,
		Tolerance:       v.Tolerance.std(),
		Header:          v.Header,
		Encoding:        v.Encoding,
		Prefix:          v.Prefix,
		TimestampHeader: v.TimestampHeader,
		SignedContent:   v.SignedContent,
		PublicURL:       v.PublicURL,
		VerifyToken:     v.VerifyToken,
		AllowUnsigned:   v.AllowUnsigned,

		Algorithm:                v.Algorithm,
		SignatureKey:             v.SignatureKey,
		TimestampKey:             v.TimestampKey,
		TimestampFormat:          v.TimestampFormat,
		SubscriptionConfirmation: v.SubscriptionConfirmation,
	}
}

// contentWindow is the source's duplicate_content_window, by default
// retention for twilio and 0 (off) for every other scheme. Twilio signs
// every form parameter, and each of its requests names the message or
// call it is about (its SID) and what happened to it (status, sequence
// number), so two distinct Twilio events never share signed content.
// GitHub and Shopify sign only the body, whose timestamps have second
// precision: a change undone and redone within a second (a label removed
// and added again, a product set back and forth) can send byte-identical
// bodies as distinct events, and the guard would drop the later one.
// Other schemes sign their id or leave it to the operator.
func (s sourceConf) contentWindow(retention time.Duration) time.Duration {
	if s.DuplicateContentWindow != nil {
		return s.DuplicateContentWindow.std()
	}
	if s.Verify.Scheme == verify.SchemeTwilio {
		return retention
	}
	return 0
}

func (s sourceConf) eventIDSpec() string {
	if s.EventID != "" {
		return s.EventID
	}
	return verify.SchemeDefaults(s.Verify.Scheme).EventID
}

// process returns the webhookd process configuration of this file, for
// the parts r names.
func (c *config) process(r webhookd.Roles) (webhookd.Config, error) {
	sources, err := c.gatewaySources()
	if err != nil {
		return webhookd.Config{}, err
	}
	backoff := jobs.Backoff{Base: c.Worker.RetryBase.std(), Max: c.Worker.RetryMax.std()}
	return webhookd.Config{
		Listen:       c.Listen,
		DatabaseURL:  c.DatabaseURL,
		Redis:        c.redis(),
		Queue:        c.Queue,
		QueueShards:  c.QueueShards,
		Roles:        r,
		Lease:        c.Lease.std(),
		Retention:    c.Retention.std(),
		MaxBodyBytes: c.MaxBodyBytes,
		Sources:      sources,
		Routes:       c.routes(),
		Admin: webhookd.AdminConfig{
			Tokens:                  c.fullAdminTokens(),
			ReadOnlyTokens:          c.Admin.ReadOnlyTokens,
			UnsafeTokenlessLoopback: c.Admin.UnsafeTokenlessLoopback,
			Hosts:                   listenNames(c.Listen),
			AllowQueueActions:       c.Admin.AllowQueueActions,
		},
		Worker: webhookd.WorkerConfig{
			Concurrency:     c.Worker.Concurrency,
			Backoff:         backoff,
			DefaultHold:     c.Worker.DefaultHold.std(),
			ShutdownTimeout: c.Worker.ShutdownTimeout.std(),
		},
		Recovery: jobs.ReconcilerConfig{
			Interval: c.Worker.RecoveryInterval.std(),
			MinAge:   c.Worker.RecoveryMinAge.std(),
		},
		Maintenance: jobs.MaintenanceConfig{
			RetentionInterval:      c.Worker.RetentionInterval.std(),
			DuplicateCheckInterval: c.Worker.DuplicateCheckInterval.std(),
		},
	}, nil
}

// routes returns where each source's events go.
func (c *config) routes() jobs.Routes {
	r := make(jobs.Routes, len(c.Sources))
	for _, s := range c.Sources {
		dests := make(map[string]jobs.Destination, len(s.Destinations))
		for _, d := range s.Destinations {
			dest := jobs.Destination{
				Name:          d.Name,
				URL:           d.URL,
				Timeout:       d.Timeout.std(),
				MaxAttempts:   d.MaxAttempts,
				SigningSecret: d.SigningSecret,
				Concurrency:   d.Concurrency,
			}
			dest.Filter, _ = glob.CompileFilter(d.Filter) // validated
			dest.ForwardHeaders = jobs.ForwardedHeaders(s.Verify.Scheme, d.ForwardHeaders)
			if d.RateLimit != "" {
				rate, _ := parseRate(d.RateLimit) // validated
				dest.Rate = &rate
			}
			if c := d.Circuit; c != nil {
				if c.Failures != nil {
					dest.Circuit.Failures, dest.Circuit.Disabled = *c.Failures, *c.Failures == 0
				}
				dest.Circuit.Cooldown = c.Cooldown.std()
			}
			dests[d.Name] = dest.WithDefaults()
		}
		r[s.Name] = dests
	}
	return r
}

// sourceSpec is s as the gateway builds it.
func (s sourceConf) sourceSpec() gateway.SourceSpec {
	spec := gateway.SourceSpec{Verify: s.verifyConfig(), EventID: s.EventID, EventType: s.EventType, Destinations: len(s.Destinations),
		MaxBodyBytes: s.MaxBodyBytes}
	if r := s.Respond; r != nil {
		spec.Respond = &verify.Response{Status: r.Status, Body: r.Body, ContentType: r.ContentType}
	}
	if s.Order != nil {
		spec.OrderEntity, spec.OrderVersion = s.Order.Entity, s.Order.Version
	}
	return spec
}

// gatewaySources builds the gateway's sources; validate has checked them.
func (c *config) gatewaySources() (map[string]gateway.Source, error) {
	out := make(map[string]gateway.Source, len(c.Sources))
	for _, s := range c.Sources {
		src, err := gateway.NewSource(s.sourceSpec())
		if err != nil {
			return nil, err
		}
		src.ContentWindow = s.contentWindow(c.Retention.std())
		src.Filters = c.routes().SourceFilters(s.Name)
		for _, d := range s.Destinations {
			for _, name := range d.ForwardHeaders {
				if name = http.CanonicalHeaderKey(name); !slices.Contains(src.ForwardHeaders, name) {
					src.ForwardHeaders = append(src.ForwardHeaders, name)
				}
			}
		}
		out[s.Name] = src
	}
	return out, nil
}
