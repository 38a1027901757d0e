// Package config is the one place that reads webhookd's configuration:
// the YAML file and the environment. It expands ${VAR} in values,
// decodes strictly (an unknown key is an error, with the key it probably
// meant), applies the environment's overrides, hands each package its
// own spec to check and build (webhookd.NewSources: sources, their
// verification and destinations), and reports every problem of a file in
// one run, each once, as "<file>:<line>: <key>: <problem>" (or
// "$<VAR> (environment): <key>: <problem>" for a value the environment
// set). What it builds is built once and handed to the process: nothing
// is validated here and built again elsewhere.
//
// Defaults live beside the fields they belong to, in their packages
// (jobs.DefaultTimeout, dedupe.DefaultLease, …); this package adds only
// the defaults of the file itself (where Postgres and Redis are).
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/webhookd/webhookd"
	"github.com/webhookd/webhookd/alerts"
	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/field"
	"github.com/webhookd/webhookd/jobs"
)

// Defaults of the file's own keys.
const (
	// DefaultDatabaseURL is database_url when neither the file nor
	// DATABASE_URL names one.
	DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/webhookd"
	// DefaultRedisURL is redis_url when neither the file nor REDIS_URL
	// names a Redis.
	DefaultRedisURL = "redis://127.0.0.1:6379/0"
	// DefaultPath is the file the commands read without -f.
	DefaultPath = "webhookd.yaml"
)

// Bounds of the file's own keys: values past them are mistakes, and some
// would break the process (a body limit that overflows, a lease shorter
// than a call).
const (
	// MaxQueueShards bounds queue_shards: every worker polls every shard.
	MaxQueueShards = 256
	// MaxBodyLimit bounds max_body_bytes.
	MaxBodyLimit         = 256 << 20
	minLease             = time.Second
	maxLease             = 24 * time.Hour
	minRetention         = time.Hour
	minRecoveryInterval  = 100 * time.Millisecond
	maxWorkerConcurrency = 10_000
	maxIssueCloseAfter   = 10_000
	shortSecret          = 16
	unwiseTolerance      = 15 * time.Minute
)

// File is the configuration file's shape (SPEC.md, "Configuration"). The
// sources are decoded straight into their packages' specs, so a key of a
// source, a destination or a verification is written once, beside the
// code that uses it.
type File struct {
	Listen               string `yaml:"listen"`
	DatabaseURL          string `yaml:"database_url"`
	webhookd.RedisConfig `yaml:",inline"`
	// QueueShards spreads tasks over this many queues. Defaults to 1.
	QueueShards  int    `yaml:"queue_shards"`
	Queue        string `yaml:"queue"`
	AdminToken   string `yaml:"admin_token"`
	Admin        Admin  `yaml:"admin"`
	MaxBodyBytes int64  `yaml:"max_body_bytes"`
	// AllowLinkLocalDestinations lets destinations call link-local and
	// cloud metadata addresses; refused by default.
	AllowLinkLocalDestinations bool          `yaml:"allow_link_local_destinations"`
	Retention                  time.Duration `yaml:"retention"`
	Lease                      time.Duration `yaml:"lease"`
	LogLevel                   string        `yaml:"log_level"`
	Worker                     Worker        `yaml:"worker"`
	// Rejected bounds the rejected requests kept.
	Rejected Rejected `yaml:"rejected"`
	// Issues tunes the issues opened from delivery outcomes.
	Issues Issues `yaml:"issues"`
	// Alerts says where messages about issues go.
	Alerts alerts.Spec `yaml:"alerts"`
	// Sources are the senders, each with its destinations.
	Sources []webhookd.SourceSpec `yaml:"sources"`
}

// Rejected bounds the rejected requests a gateway keeps (the file's
// `rejected:` block; webhookd.RejectedConfig).
type Rejected struct {
	PerSourcePerMinute int           `yaml:"per_source_per_minute"`
	Retention          time.Duration `yaml:"retention"`
}

// Issues tunes issues (the file's `issues:` block; jobs.IssuesConfig).
type Issues struct {
	// CloseAfter is how many successful calls in a row to a destination
	// close its open issues. Defaults to jobs.DefaultIssueCloseAfter.
	CloseAfter int `yaml:"close_after"`
}

// Worker tunes the worker side (the file's `worker:` block).
type Worker struct {
	// Concurrency is the tasks run at once (webhookd.WorkerConfig).
	Concurrency int `yaml:"concurrency"`
	// RetryBase and RetryMax space retries (jobs.Backoff).
	RetryBase time.Duration `yaml:"retry_base"`
	RetryMax  time.Duration `yaml:"retry_max"`
	// DefaultHold is the wait after a 429 without Retry-After.
	DefaultHold time.Duration `yaml:"default_hold"`
	// ShutdownTimeout bounds the wait for running tasks at shutdown.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// RecoveryInterval is the time between recovery passes; at most
	// lease/2 (jobs.ReconcilerConfig.Interval).
	RecoveryInterval time.Duration `yaml:"recovery_interval"`
	// RecoveryMinAge leaves events recorded more recently than this to
	// the relay (jobs.ReconcilerConfig.MinAge).
	RecoveryMinAge time.Duration `yaml:"recovery_min_age"`
	// RetentionInterval is the time between retention runs.
	RetentionInterval time.Duration `yaml:"retention_interval"`
	// DuplicateCheckInterval is the time between duplicate checks.
	DuplicateCheckInterval time.Duration `yaml:"duplicate_check_interval"`
}

// Admin tunes the admin surface (the file's `admin:` block). Its tokens
// add to admin_token; with none at all, admin is off unless
// UnsafeTokenlessLoopback.
type Admin struct {
	// AllowQueueActions lets the Asynq dashboard change queues and tasks
	// (delete, run, archive, pause); it is read-only otherwise.
	AllowQueueActions bool `yaml:"allow_queue_actions"`
	// Tokens are more full-access tokens, beside admin_token: list the
	// new one and the old one while rotating.
	Tokens []string `yaml:"tokens"`
	// ReadOnlyTokens may look at everything but replay, pause or resume
	// nothing.
	ReadOnlyTokens []string `yaml:"read_only_tokens"`
	// UnsafeTokenlessLoopback opts in to admin without any token for
	// loopback peers addressing localhost; refused together with a token.
	UnsafeTokenlessLoopback bool `yaml:"unsafe_tokenless_loopback"`
	// SecureCookie marks the session cookie Secure on every request:
	// set it when a TLS-terminating proxy serves webhookd, which sees
	// plain HTTP and would not mark it otherwise.
	SecureCookie bool `yaml:"secure_cookie"`
	// PublicURL is the base URL people reach webhookd's admin at
	// (https://webhookd.example.com); alerts link to issue pages under
	// it.
	PublicURL string `yaml:"public_url"`
}

// Config is a configuration loaded: the process it describes, ready for
// webhookd.Start once the caller sets the roles (and tracing).
type Config struct {
	// Path is the file it was read from.
	Path string
	// Process is the process configuration, defaults applied, its
	// sources built.
	Process webhookd.Config
	// LogLevel is log_level.
	LogLevel slog.Level
	// File is the file as decoded, after ${VAR} expansion and the
	// environment's overrides.
	File File
	// Warnings are values that work but are unwise (a short secret, a
	// long replay window), located like errors; the process logs them.
	Warnings []*Error

	// root is the parsed document, for finding a key's line.
	root *yaml.Node
	// fromEnv maps the keys an environment variable set to its name.
	fromEnv map[string]string
}

// Load reads path and parses it with the process's environment (Parse).
// A missing file is an error wrapping fs.ErrNotExist.
func Load(path string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("error reading config %s: %w", path, err)
	}
	return Parse(path, raw, os.LookupEnv)
}

// Parse parses raw, the contents of path, with lookup for the
// environment. It returns every problem of the file joined, each an
// *Error, in the order of the file.
func Parse(path string, raw []byte, lookup func(string) (string, bool)) (*Config, error) {
	c := &Config{Path: path, fromEnv: map[string]string{}}
	var root yaml.Node
	if err := yaml.Unmarshal(raw, &root); err != nil {
		return nil, decodeErrors(path, nil, err)
	}
	c.root = &root
	p := problems{c: c}
	p.add(expandVars(path, &root, nil, lookup)...)
	p.add(unknownKeys(path, &root, reflectFile, nil)...)
	if root.Kind != 0 { // an empty file is an empty config
		if err := root.Decode(&c.File); err != nil {
			p.add(decodeErrors(path, &root, err))
		}
	}
	for _, o := range envOverrides {
		if v, ok := lookup(o.env); ok && v != "" {
			*o.field(&c.File) = v
			c.fromEnv[o.key] = o.env
		}
	}
	c.File.setDefaults()
	c.Process, c.LogLevel = c.File.process()
	p.addField(c.File.validate(c.Process))
	p.addField(c.validateAdmin())
	if sources, err := webhookd.NewSources(c.File.Sources, webhookd.SourcesOptions{
		Lease: c.Process.Lease, Retention: c.Process.Retention,
		Listen: c.Process.Listen, AllowLinkLocalDestinations: c.Process.AllowLinkLocalDestinations,
	}); err != nil {
		p.addField(err)
	} else {
		c.Process.Sources = sources
	}
	if channels, err := alerts.NewChannels(c.File.Alerts); err != nil {
		p.addField(field.Prefix("alerts", err))
	} else {
		c.Process.Alerts.Channels = channels
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	for _, w := range field.List(c.File.warnings()) {
		c.Warnings = append(c.Warnings, c.locate(w))
	}
	return c, nil
}

// warnings are the file's values that work but are unwise.
func (f *File) warnings() error {
	var out []error
	if len(f.Alerts.Channels) > 0 && f.Admin.PublicURL == "" {
		out = append(out, field.Errorf("admin.public_url", "not set: alerts link to /admin/view/issues/<id> without a host"))
	}
	for i, s := range f.Sources {
		v := s.Verify
		if v.Tolerance > unwiseTolerance {
			out = append(out, field.Errorf(field.Index("sources", i)+".verify.tolerance",
				"%s lets a captured delivery be replayed for that long; the senders' own windows are 5m or less", v.Tolerance))
		}
		if v.Scheme == verify.SchemeDiscord || v.Scheme == verify.SchemeSendGrid {
			continue // public keys, not shared secrets
		}
		for j, secret := range v.Secrets {
			if len(secret) < shortSecret {
				out = append(out, field.Errorf(field.Index(field.Index("sources", i)+".verify.secrets", j),
					"shorter than %d bytes: anyone who guesses it can sign events", shortSecret))
			}
		}
	}
	return errors.Join(out...)
}

// setDefaults fills the file's own defaults: where Postgres and Redis
// are, and the log level. Every other default is its package's.
func (f *File) setDefaults() {
	if f.DatabaseURL == "" {
		f.DatabaseURL = DefaultDatabaseURL
	}
	if f.URL == "" && f.Sentinel == nil && f.Cluster == nil {
		f.URL = DefaultRedisURL
	}
	if f.LogLevel == "" {
		f.LogLevel = "info"
	}
}

// process maps the file's top-level keys onto the process configuration,
// its defaults applied (webhookd.Config.WithDefaults).
func (f *File) process() (webhookd.Config, slog.Level) {
	var level slog.Level
	_ = level.UnmarshalText([]byte(f.LogLevel)) // validated
	cfg := webhookd.Config{
		Listen:       f.Listen,
		DatabaseURL:  f.DatabaseURL,
		Redis:        f.RedisConfig,
		Queue:        f.Queue,
		QueueShards:  f.QueueShards,
		Lease:        f.Lease,
		Retention:    f.Retention,
		Rejected:     webhookd.RejectedConfig{PerSourcePerMinute: f.Rejected.PerSourcePerMinute, Retention: f.Rejected.Retention},
		MaxBodyBytes: f.MaxBodyBytes,

		AllowLinkLocalDestinations: f.AllowLinkLocalDestinations,
		Admin: webhookd.AdminConfig{
			Tokens:                  f.fullAdminTokens(),
			ReadOnlyTokens:          f.Admin.ReadOnlyTokens,
			UnsafeTokenlessLoopback: f.Admin.UnsafeTokenlessLoopback,
			AllowQueueActions:       f.Admin.AllowQueueActions,
			SecureCookie:            f.Admin.SecureCookie,
		},
		Worker: webhookd.WorkerConfig{
			Concurrency:     f.Worker.Concurrency,
			Backoff:         jobs.Backoff{Base: f.Worker.RetryBase, Max: f.Worker.RetryMax},
			DefaultHold:     f.Worker.DefaultHold,
			ShutdownTimeout: f.Worker.ShutdownTimeout,
		},
		Recovery: jobs.ReconcilerConfig{
			Interval: f.Worker.RecoveryInterval,
			MinAge:   f.Worker.RecoveryMinAge,
		},
		Maintenance: jobs.MaintenanceConfig{
			RetentionInterval:      f.Worker.RetentionInterval,
			DuplicateCheckInterval: f.Worker.DuplicateCheckInterval,
		},
		Issues: jobs.IssuesConfig{CloseAfter: f.Issues.CloseAfter},
		Alerts: alerts.NotifierConfig{Renotify: f.Alerts.Renotify, PublicURL: f.Admin.PublicURL},
	}.WithDefaults()
	cfg.Admin.Hosts = ListenNames(cfg.Listen)
	return cfg, level
}

// validate checks the file's top-level keys, on the process they make
// (defaults applied).
func (f *File) validate(p webhookd.Config) error {
	var errs []error
	add := func(path, format string, args ...any) { errs = append(errs, field.Errorf(path, format, args...)) }
	if f.MaxBodyBytes < 0 || f.MaxBodyBytes > MaxBodyLimit {
		add("max_body_bytes", "must be between 1 and %d (%d MiB)", MaxBodyLimit, MaxBodyLimit>>20)
	}
	for i, s := range f.Sources {
		// A source's own limit (negative ones are the source's check).
		if s.MaxBodyBytes > MaxBodyLimit {
			add(field.Index("sources", i)+".max_body_bytes", "must be at most %d (%d MiB)", MaxBodyLimit, MaxBodyLimit>>20)
		}
	}
	if p.Lease < minLease || p.Lease > maxLease {
		add("lease", "must be between %s and %s", minLease, maxLease)
	}
	if p.Retention < minRetention {
		add("retention", "must be at least %s", minRetention)
	}
	if f.Rejected.PerSourcePerMinute < 0 || f.Rejected.PerSourcePerMinute > 10000 {
		add("rejected.per_source_per_minute", "must be between 1 and 10000")
	}
	if f.Rejected.Retention < 0 {
		add("rejected.retention", "must not be negative")
	}
	if !strings.HasPrefix(f.DatabaseURL, "postgres://") && !strings.HasPrefix(f.DatabaseURL, "postgresql://") {
		add("database_url", "must be a postgres:// URL")
	}
	errs = append(errs, f.RedisConfig.Validate())
	if f.QueueShards < 0 || p.QueueShards > MaxQueueShards {
		add("queue_shards", "must be between 1 and %d", MaxQueueShards)
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, f.LogLevel) {
		add("log_level", "must be debug, info, warn or error")
	}
	w := f.Worker
	switch {
	case p.Recovery.Interval > p.Lease/2:
		add("worker.recovery_interval", "must be at most lease/2, so an expired lease is found promptly")
	case w.RecoveryInterval > 0 && w.RecoveryInterval < minRecoveryInterval:
		add("worker.recovery_interval", "must be at least %s: recovery reads Postgres every pass", minRecoveryInterval)
	}
	if w.RetryBase > 0 && w.RetryMax > 0 && w.RetryBase > w.RetryMax {
		add("worker.retry_base", "must not exceed worker.retry_max")
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{
		{"worker.retry_base", w.RetryBase}, {"worker.retry_max", w.RetryMax}, {"worker.default_hold", w.DefaultHold},
		{"worker.shutdown_timeout", w.ShutdownTimeout}, {"worker.recovery_interval", w.RecoveryInterval},
		{"worker.recovery_min_age", w.RecoveryMinAge}, {"worker.retention_interval", w.RetentionInterval},
		{"worker.duplicate_check_interval", w.DuplicateCheckInterval}, {"lease", f.Lease}, {"retention", f.Retention},
	} {
		if d.v < 0 {
			add(d.key, "must not be negative")
		}
	}
	if f.Issues.CloseAfter < 0 || f.Issues.CloseAfter > maxIssueCloseAfter {
		add("issues.close_after", "must be between 1 and %d", maxIssueCloseAfter)
	}
	if u := f.Admin.PublicURL; u != "" {
		if pu, err := url.Parse(u); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			add("admin.public_url", "must be an absolute http:// or https:// URL")
		}
	}
	if w.Concurrency < 0 || w.Concurrency > maxWorkerConcurrency {
		add("worker.concurrency", "must be between 0 (the default) and %d", maxWorkerConcurrency)
	}
	for i, s := range f.Sources {
		if len(s.Destinations) == 0 {
			add(field.Index("sources", i)+".destinations", "at least one destination is required")
		}
	}
	return errors.Join(errs...)
}

// LocateError returns err, a problem of the key at path (e.g. "listen"
// for an address the process could not bind), located like every
// configuration error.
func (c *Config) LocateError(path string, err error) error {
	return c.locate(&field.Error{Path: path, Err: err})
}
