package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"go.yaml.in/yaml/v3"

	"github.com/webhookd/webhookd"
	"github.com/webhookd/webhookd/gateway"
	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/jobs"
)

// config is the YAML file of SPEC.md after ${VAR} expansion and the
// environment overrides.
type config struct {
	Listen       string       `yaml:"listen"`
	DatabaseURL  string       `yaml:"database_url"`
	RedisURL     string       `yaml:"redis_url"`
	AdminToken   string       `yaml:"admin_token"`
	MaxBodyBytes int64        `yaml:"max_body_bytes"`
	Retention    duration     `yaml:"retention"`
	Lease        duration     `yaml:"lease"`
	Queue        string       `yaml:"queue"`
	LogLevel     string       `yaml:"log_level"`
	Worker       workerConf   `yaml:"worker"`
	Admin        adminConf    `yaml:"admin"`
	Sources      []sourceConf `yaml:"sources"`

	// RedisSentinel and RedisCluster replace redis_url (configredis.go).
	RedisSentinel *sentinelConf `yaml:"redis_sentinel"`
	RedisCluster  *clusterConf  `yaml:"redis_cluster"`
	// QueueShards spreads tasks over this many queues. Defaults to 1.
	QueueShards int `yaml:"queue_shards"`

	// path is the file the config was read from, for error messages.
	path string
	// root is the parsed document, for finding a key's line.
	root *yaml.Node
}

// workerConf tunes the worker side.
type workerConf struct {
	Concurrency  int      `yaml:"concurrency"`
	RetryBase    duration `yaml:"retry_base"`
	RetryMax     duration `yaml:"retry_max"`
	DefaultHold  duration `yaml:"default_hold"`
	ShutdownWait duration `yaml:"shutdown_timeout"`
	// RecoveryEvery is the time between recovery passes (the reconciler:
	// expired leases, due retries, unclaimed events). Defaults to lease/2,
	// at most 2s; it may not exceed lease/2.
	RecoveryEvery duration `yaml:"recovery_interval"`
	// RecoveryMinAge leaves events recorded more recently than this to the
	// relay's fast path. Defaults to 2s.
	RecoveryMinAge duration `yaml:"recovery_min_age"`
	// RetentionEvery is the time between retention runs. Defaults to 1h.
	RetentionEvery duration `yaml:"retention_interval"`
	// DuplicateCheckEvery is the time between duplicate checks. Defaults to 10m.
	DuplicateCheckEvery duration `yaml:"duplicate_check_interval"`
}

// adminConf tunes the admin surface.
type adminConf struct {
	// AllowQueueActions lets the Asynq dashboard change queues and tasks
	// (delete, run, archive, pause); it is read-only otherwise.
	AllowQueueActions bool `yaml:"allow_queue_actions"`
}

type sourceConf struct {
	Name         string     `yaml:"name"`
	Verify       verifyConf `yaml:"verify"`
	EventID      string     `yaml:"event_id"`
	Order        *orderConf `yaml:"order"`
	Destinations []destConf `yaml:"destinations"`
}

type verifyConf struct {
	Scheme          string   `yaml:"scheme"`
	Secrets         []string `yaml:"secrets"`
	Tolerance       duration `yaml:"tolerance"`
	Header          string   `yaml:"header"`
	Encoding        string   `yaml:"encoding"`
	Prefix          *string  `yaml:"prefix"`
	TimestampHeader string   `yaml:"timestamp_header"`
	SignedContent   string   `yaml:"signed_content"`
	PublicURL       string   `yaml:"public_url"`
	AllowUnsigned   bool     `yaml:"allow_unsigned"`
}

type orderConf struct {
	Entity  string `yaml:"entity"`
	Version string `yaml:"version"`
}

type destConf struct {
	Name          string   `yaml:"name"`
	URL           string   `yaml:"url"`
	Timeout       duration `yaml:"timeout"`
	MaxAttempts   int      `yaml:"max_attempts"`
	SigningSecret string   `yaml:"signing_secret"`
}

// duration is a time.Duration written as "30s", "2m", "720h".
type duration time.Duration

func (d *duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil || v < 0 {
		return fmt.Errorf("line %d: %q is not a duration (use e.g. 30s, 2m, 720h)", n.Line, n.Value)
	}
	*d = duration(v)
	return nil
}

func (d duration) std() time.Duration { return time.Duration(d) }

// renamedKeys names the keys that replaced keys of earlier versions.
var renamedKeys = map[string]string{
	"sweep_interval": "worker.recovery_interval",
	"relay_interval": "worker.recovery_interval",
	"relay_min_age":  "worker.recovery_min_age",
}

var (
	nameRE = regexp.MustCompile(`^[a-z0-9_-]+$`)
	varRE  = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
	// unknownFieldRE rewrites yaml's "field x not found in type main.y".
	unknownFieldRE = regexp.MustCompile(`field (\S+) not found in type \S+`)
)

// loadConfig reads path, expands ${VAR} from the environment, decodes it
// strictly, applies the environment overrides and validates the result.
func loadConfig(path string) (*config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("error reading config: %w", err)
	}
	return parseConfig(path, raw, os.LookupEnv)
}

func parseConfig(path string, raw []byte, lookup func(string) (string, bool)) (*config, error) {
	var expandErr error
	expanded := varRE.ReplaceAllFunc(raw, func(m []byte) []byte {
		name := string(varRE.FindSubmatch(m)[1])
		v, _ := lookup(name)
		if strings.ContainsAny(v, "\r\n") && expandErr == nil {
			expandErr = fmt.Errorf("%s: ${%s} holds a line break; not allowed in the config", path, name)
		}
		return []byte(v)
	})
	if expandErr != nil {
		return nil, expandErr
	}

	cfg := &config{path: path}
	var root yaml.Node
	if err := yaml.Unmarshal(expanded, &root); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(expanded))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		msg = unknownFieldRE.ReplaceAllStringFunc(msg, func(m string) string {
			key := unknownFieldRE.FindStringSubmatch(m)[1]
			if now, ok := renamedKeys[key]; ok {
				return fmt.Sprintf("unknown key %q (replaced by %s)", key, now)
			}
			return fmt.Sprintf("unknown key %q", key)
		})
		return nil, fmt.Errorf("%s: %s", path, msg)
	}
	cfg.root = &root

	for env, field := range map[string]*string{
		"DATABASE_URL":         &cfg.DatabaseURL,
		"REDIS_URL":            &cfg.RedisURL,
		"WEBHOOKD_LISTEN":      &cfg.Listen,
		"WEBHOOKD_ADMIN_TOKEN": &cfg.AdminToken,
	} {
		if v, ok := lookup(env); ok && v != "" {
			*field = v
		}
	}
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

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
	if c.Worker.RecoveryEvery == 0 {
		c.Worker.RecoveryEvery = min(c.Lease/2, duration(2*time.Second))
	}
	if c.Worker.RecoveryMinAge == 0 {
		c.Worker.RecoveryMinAge = duration(2 * time.Second)
	}
}

// fieldError names the key (and its line, when known).
func (c *config) fieldError(msg string, path ...any) error {
	key := keyPath(path...)
	if line := lineOf(c.root, path...); line > 0 {
		return fmt.Errorf("%s:%d: %s: %s", c.path, line, key, msg)
	}
	return fmt.Errorf("%s: %s: %s", c.path, key, msg)
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
	if c.Worker.RecoveryEvery > c.Lease/2 {
		return c.fieldError("must be at most lease/2, so an expired lease is found promptly", "worker", "recovery_interval")
	}
	if c.Worker.Concurrency < 0 {
		return c.fieldError("must not be negative", "worker", "concurrency")
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
			if d.SigningSecret != "" {
				if err := (verify.Config{Scheme: verify.SchemeStandard, Secrets: []string{d.SigningSecret}}).Validate(); err != nil {
					return c.fieldError("must be a Standard Webhooks secret, whsec_ followed by base64", "sources", i, "destinations", j, "signing_secret")
				}
			}
		}
	}
	return nil
}

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
		AllowUnsigned:   v.AllowUnsigned,
	}
}

func (s sourceConf) eventIDSpec() string {
	if s.EventID != "" {
		return s.EventID
	}
	return verify.DefaultEventID(s.Verify.Scheme)
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
			Token:             c.AdminToken,
			Hosts:             listenNames(c.Listen),
			AllowQueueActions: c.Admin.AllowQueueActions,
		},
		Worker: webhookd.WorkerConfig{
			Concurrency:     c.Worker.Concurrency,
			Backoff:         backoff,
			DefaultHold:     c.Worker.DefaultHold.std(),
			ShutdownTimeout: c.Worker.ShutdownWait.std(),
		},
		Recovery: jobs.ReconcilerConfig{
			Interval: c.Worker.RecoveryEvery.std(),
			MinAge:   c.Worker.RecoveryMinAge.std(),
		},
		Maintenance: jobs.MaintenanceConfig{
			RetentionInterval:      c.Worker.RetentionEvery.std(),
			DuplicateCheckInterval: c.Worker.DuplicateCheckEvery.std(),
		},
	}, nil
}

// routes returns where each source's events go.
func (c *config) routes() jobs.Routes {
	r := make(jobs.Routes, len(c.Sources))
	for _, s := range c.Sources {
		dests := make(map[string]jobs.Destination, len(s.Destinations))
		for _, d := range s.Destinations {
			dests[d.Name] = jobs.Destination{
				Name:          d.Name,
				URL:           d.URL,
				Timeout:       d.Timeout.std(),
				MaxAttempts:   d.MaxAttempts,
				SigningSecret: d.SigningSecret,
			}.WithDefaults()
		}
		r[s.Name] = dests
	}
	return r
}

// sourceSpec is s as the gateway builds it.
func (s sourceConf) sourceSpec() gateway.SourceSpec {
	spec := gateway.SourceSpec{Verify: s.verifyConfig(), EventID: s.EventID, Destinations: len(s.Destinations)}
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
		out[s.Name] = src
	}
	return out, nil
}

// keyPath renders a path like sources[0].destinations[1].url.
func keyPath(path ...any) string {
	var b strings.Builder
	for _, p := range path {
		switch p := p.(type) {
		case int:
			b.WriteString("[" + strconv.Itoa(p) + "]")
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(p)
		}
	}
	return b.String()
}

// lineOf finds the line of the value at path in the YAML document, or 0.
func lineOf(root *yaml.Node, path ...any) int {
	n := root
	if n == nil {
		return 0
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := 0
	for _, p := range path {
		switch p := p.(type) {
		case string:
			if n.Kind != yaml.MappingNode {
				return line
			}
			found := false
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == p {
					line = n.Content[i].Line
					n = n.Content[i+1]
					found = true
					break
				}
			}
			if !found {
				return line
			}
		case int:
			if n.Kind != yaml.SequenceNode || p >= len(n.Content) {
				return line
			}
			n = n.Content[p]
			line = n.Line
		}
	}
	return line
}
