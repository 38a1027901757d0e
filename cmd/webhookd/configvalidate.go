package main

// Defaults and validation of a parsed config: every problem is reported
// at once, each naming its key and where it came from.

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/hibiken/asynq"
	"golang.org/x/net/http/httpguts"

	"github.com/webhookd/webhookd/gateway"
	"github.com/webhookd/webhookd/gateway/eventid"
	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/glob"
	"github.com/webhookd/webhookd/jobs"
)

func (c *config) setDefaults() {
	if c.Listen == "" {
		c.Listen = ":8080"
	}
	if c.DatabaseURL == "" {
		c.DatabaseURL = "postgres://postgres@127.0.0.1:5432/webhookd"
	}
	if c.RedisURL == "" && c.RedisSentinel == nil && c.RedisCluster == nil {
		c.RedisURL = "redis://127.0.0.1:6379/0"
	}
	if c.QueueShards == 0 {
		c.QueueShards = 1
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 1 << 20
	}
	if c.Retention == 0 {
		c.Retention = duration(720 * time.Hour)
	}
	if c.Lease == 0 {
		c.Lease = duration(2 * time.Minute)
	}
	if c.Queue == "" {
		c.Queue = jobs.DefaultQueue
	}
	if c.LogLevel == "" {
		c.LogLevel = "info"
	}
	if c.Worker.RecoveryInterval == 0 {
		c.Worker.RecoveryInterval = min(c.Lease/2, duration(2*time.Second))
	}
	if c.Worker.RecoveryMinAge == 0 {
		c.Worker.RecoveryMinAge = duration(2 * time.Second)
	}
}

func (c *config) validate() error {
	if c.MaxBodyBytes < 0 {
		return c.fieldError("must be positive", "max_body_bytes")
	}
	if c.Lease.std() < time.Second {
		return c.fieldError("must be at least 1s", "lease")
	}
	if c.Retention.std() < time.Hour {
		return c.fieldError("must be at least 1h", "retention")
	}
	if _, err := url.Parse(c.DatabaseURL); err != nil || !strings.HasPrefix(c.DatabaseURL, "postgres") {
		return c.fieldError("must be a postgres:// URL", "database_url")
	}
	if err := c.validateRedis(); err != nil {
		return err
	}
	if _, err := asynq.ParseRedisURI(c.RedisURL); c.RedisURL != "" && err != nil {
		return c.fieldError("must be a redis:// URL", "redis_url")
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return c.fieldError("must be debug, info, warn or error", "log_level")
	}
	if c.Worker.RecoveryInterval > c.Lease/2 {
		return c.fieldError("must be at most lease/2, so an expired lease is found promptly", "worker", "recovery_interval")
	}
	if c.Worker.Concurrency < 0 {
		return c.fieldError("must not be negative", "worker", "concurrency")
	}
	if err := c.validateAdmin(); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i, s := range c.Sources {
		if !nameRE.MatchString(s.Name) {
			return c.fieldError(fmt.Sprintf("%q must match [a-z0-9_-]+", s.Name), "sources", i, "name")
		}
		if seen[s.Name] {
			return c.fieldError(fmt.Sprintf("duplicate source name %q", s.Name), "sources", i, "name")
		}
		seen[s.Name] = true
		if _, err := gateway.NewSource(s.sourceSpec()); err != nil {
			var se *gateway.SourceError
			if !errors.As(err, &se) {
				return c.fieldError(err.Error(), "sources", i)
			}
			path := []any{"sources", i}
			for _, part := range strings.Split(se.Field, ".") {
				path = append(path, part)
			}
			return c.fieldError(se.Err.Error(), path...)
		}
		if s.Order != nil {
			for _, f := range [...]struct{ key, spec string }{{"entity", s.Order.Entity}, {"version", s.Order.Version}} {
				ex, _ := eventid.Parse(f.spec) // parsed by NewSource above
				if h, ok := ex.Header(); ok && !s.verifyConfig().SignsHeader(h) && !s.Order.AllowUnsignedHeader {
					return c.fieldError(fmt.Sprintf("header %s is not covered by scheme %s's signature: a replayed copy could carry any %s "+
						"and hold back every later update of the entity (order.allow_unsigned_header: true accepts that)",
						h, s.Verify.Scheme, f.key), "sources", i, "order", f.key)
				}
			}
		}
		if w := s.DuplicateContentWindow; w != nil && *w > 0 {
			if s.Verify.Scheme == verify.SchemeNone {
				return c.fieldError("scheme none signs nothing to compare", "sources", i, "duplicate_content_window")
			}
			if *w > c.Retention {
				return c.fieldError("must be at most retention (the events it points at are kept that long)", "sources", i, "duplicate_content_window")
			}
		}
		if len(s.Destinations) == 0 {
			return c.fieldError("at least one destination is required", "sources", i, "destinations")
		}
		dests := map[string]bool{}
		for j, d := range s.Destinations {
			if !nameRE.MatchString(d.Name) {
				return c.fieldError(fmt.Sprintf("%q must match [a-z0-9_-]+", d.Name), "sources", i, "destinations", j, "name")
			}
			if dests[d.Name] {
				return c.fieldError(fmt.Sprintf("duplicate destination name %q", d.Name), "sources", i, "destinations", j, "name")
			}
			dests[d.Name] = true
			u, err := url.Parse(d.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return c.fieldError("must be an absolute http(s) URL", "sources", i, "destinations", j, "url")
			}
			if d.MaxAttempts < 0 {
				return c.fieldError("must be positive", "sources", i, "destinations", j, "max_attempts")
			}
			if d.Timeout.std() >= c.Lease.std() {
				return c.fieldError("must be shorter than lease", "sources", i, "destinations", j, "timeout")
			}
			if d.RateLimit != "" {
				if _, err := parseRate(d.RateLimit); err != nil {
					return c.fieldError(err.Error(), "sources", i, "destinations", j, "rate_limit")
				}
			}
			if d.Concurrency < 0 {
				return c.fieldError("must not be negative", "sources", i, "destinations", j, "concurrency")
			}
			if cc := d.Circuit; cc != nil {
				if cc.Failures != nil && *cc.Failures < 0 {
					return c.fieldError("must not be negative (0 turns the circuit off)", "sources", i, "destinations", j, "circuit", "failures")
				}
			}
			for k, name := range d.ForwardHeaders {
				switch {
				case !httpguts.ValidHeaderFieldName(name):
					return c.fieldError(fmt.Sprintf("%q is not a header name", name), "sources", i, "destinations", j, "forward_headers", k)
				case jobs.ReservedHeader(name):
					return c.fieldError(fmt.Sprintf("%s is set by webhookd itself and cannot be forwarded", name), "sources", i, "destinations", j, "forward_headers", k)
				}
			}
			if d.Filter != nil {
				if _, err := glob.CompileFilter(d.Filter); err != nil {
					return c.fieldError(err.Error(), "sources", i, "destinations", j, "filter")
				}
				if s.EventType == "" && verify.SchemeDefaults(s.Verify.Scheme).EventType == "" {
					return c.fieldError(fmt.Sprintf("source %s has no event type (scheme %s names none): set its event_type, or every event would be filtered out",
						s.Name, s.Verify.Scheme), "sources", i, "destinations", j, "filter")
				}
			}
			if d.SigningSecret != "" {
				if err := (verify.Config{Scheme: verify.SchemeStandard, Secrets: []string{d.SigningSecret}}).Validate(); err != nil {
					return c.fieldError("must be a Standard Webhooks secret, whsec_ followed by base64", "sources", i, "destinations", j, "signing_secret")
				}
			}
		}
	}
	return nil
}

// rateRE is a rate_limit: a positive count per second or minute.
var rateRE = regexp.MustCompile(`^([1-9][0-9]{0,8})/(s|m)$`)

// parseRate reads a rate_limit ("50/s", "600/m") as a limit whose burst
// is at most one second's worth (SPEC).
func parseRate(v string) (redis_rate.Limit, error) {
	m := rateRE.FindStringSubmatch(strings.TrimSpace(v))
	if m == nil {
		return redis_rate.Limit{}, fmt.Errorf("%q is not a rate: write N/s or N/m, e.g. 50/s", v)
	}
	n, _ := strconv.Atoi(m[1])
	if m[2] == "s" {
		return redis_rate.Limit{Rate: n, Period: time.Second, Burst: n}, nil
	}
	return redis_rate.Limit{Rate: n, Period: time.Minute, Burst: max(1, (n+59)/60)}, nil
}
