package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/hibiken/asynq"
	"go.yaml.in/yaml/v3"
	"golang.org/x/net/http/httpguts"

	"github.com/webhookd/webhookd"
	"github.com/webhookd/webhookd/gateway"
	"github.com/webhookd/webhookd/gateway/admin"
	"github.com/webhookd/webhookd/gateway/eventid"
	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/glob"
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
	// fromEnv maps the keys an environment variable set to its name.
	fromEnv map[string]string
}

// workerConf tunes the worker side.
type workerConf struct {
	Concurrency     int      `yaml:"concurrency"`
	RetryBase       duration `yaml:"retry_base"`
	RetryMax        duration `yaml:"retry_max"`
	DefaultHold     duration `yaml:"default_hold"`
	ShutdownTimeout duration `yaml:"shutdown_timeout"`
	// RecoveryInterval is the time between recovery passes (the reconciler:
	// expired leases, due retries, unclaimed events). Defaults to lease/2,
	// at most 2s; it may not exceed lease/2.
	RecoveryInterval duration `yaml:"recovery_interval"`
	// RecoveryMinAge leaves events recorded more recently than this to the
	// relay's fast path. Defaults to 2s.
	RecoveryMinAge duration `yaml:"recovery_min_age"`
	// RetentionInterval is the time between retention runs. Defaults to 1h.
	RetentionInterval duration `yaml:"retention_interval"`
	// DuplicateCheckInterval is the time between duplicate checks. Defaults to 10m.
	DuplicateCheckInterval duration `yaml:"duplicate_check_interval"`
}

// adminConf tunes the admin surface. Its tokens add to admin_token;
// with none at all, admin is off unless UnsafeTokenlessLoopback.
type adminConf struct {
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
}

type sourceConf struct {
	Name    string     `yaml:"name"`
	Verify  verifyConf `yaml:"verify"`
	EventID string     `yaml:"event_id"`
	// EventType says where the event's type is (json:<path> or
	// header:<Name>); unset means the scheme's default, if any.
	EventType    string     `yaml:"event_type"`
	Order        *orderConf `yaml:"order"`
	Destinations []destConf `yaml:"destinations"`
	// DuplicateContentWindow: a delivery whose signed content an event
	// recorded within it carried, under another id, is a duplicate of
	// that event. 0 turns it off; unset means contentWindow's default.
	DuplicateContentWindow *duration `yaml:"duplicate_content_window"`
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
	VerifyToken     string   `yaml:"verify_token"`
	AllowUnsigned   bool     `yaml:"allow_unsigned"`
}

type orderConf struct {
	Entity  string `yaml:"entity"`
	Version string `yaml:"version"`
	// AllowUnsignedHeader accepts an entity or version read from a header
	// the scheme does not sign, which a replayed copy may set at will.
	AllowUnsignedHeader bool `yaml:"allow_unsigned_header"`
}

type destConf struct {
	Name          string   `yaml:"name"`
	URL           string   `yaml:"url"`
	Timeout       duration `yaml:"timeout"`
	MaxAttempts   int      `yaml:"max_attempts"`
	SigningSecret string   `yaml:"signing_secret"`
	// RateLimit is "N/s" or "N/m": at most N calls per second or
	// minute, all workers together.
	RateLimit   string       `yaml:"rate_limit"`
	Concurrency int          `yaml:"concurrency"`
	Circuit     *circuitConf `yaml:"circuit"`
	// Filter lists the event types (globs) the destination wants; unset
	// wants every event.
	Filter []string `yaml:"filter"`
	// ForwardHeaders are request headers forwarded besides the scheme's.
	ForwardHeaders []string `yaml:"forward_headers"`
}

// circuitConf is a destination's circuit breaker; failures: 0 turns it
// off, an absent key keeps SPEC's default (20 failures, 1m).
type circuitConf struct {
	Failures *int     `yaml:"failures"`
	Cooldown duration `yaml:"cooldown"`
}

// duration is a time.Duration written as "30s", "2m", "720h".
type duration time.Duration

func (d *duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil || v < 0 {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %q is not a duration (use e.g. 30s, 2m, 720h)", n.Line, n.Value)}}
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
	varRE  = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)
)

// loadConfig reads path, parses it, expands ${VAR} in its values from the
// environment, decodes it strictly (unknown keys are errors), applies the
// environment overrides and validates the result.
func loadConfig(path string) (*config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("error reading config %s: %w", path, err)
	}
	return parseConfig(path, raw, os.LookupEnv)
}

func parseConfig(path string, raw []byte, lookup func(string) (string, bool)) (*config, error) {
	cfg := &config{path: path, fromEnv: map[string]string{}}
	var root yaml.Node
	if err := yaml.Unmarshal(raw, &root); err != nil {
		return nil, decodeErrors(path, nil, err)
	}
	if errs := expandVars(path, &root, nil, lookup); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if errs := unknownKeys(path, &root, reflect.TypeFor[config](), nil); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if root.Kind != 0 { // an empty file is an empty config
		if err := root.Decode(cfg); err != nil {
			return nil, decodeErrors(path, &root, err)
		}
	}
	cfg.root = &root

	for _, o := range envOverrides {
		if v, ok := lookup(o.env); ok && v != "" {
			*o.field(cfg) = v
			cfg.fromEnv[o.key] = o.env
		}
	}
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// envOverrides are the environment variables that override a key of the
// file (SPEC).
var envOverrides = []struct {
	env, key string
	field    func(*config) *string
}{
	{"DATABASE_URL", "database_url", func(c *config) *string { return &c.DatabaseURL }},
	{"REDIS_URL", "redis_url", func(c *config) *string { return &c.RedisURL }},
	{"WEBHOOKD_LISTEN", "listen", func(c *config) *string { return &c.Listen }},
	{"WEBHOOKD_ADMIN_TOKEN", "admin_token", func(c *config) *string { return &c.AdminToken }},
}

// expandVars replaces ${VAR} in the scalar values of the parsed document
// (not in keys or comments) with the variable's value from lookup, and
// ${VAR:-default} with default when VAR is unset or empty. An unset
// ${VAR} is an error naming it and its key: a secret left out of the
// environment must not become an empty secret. Expanding after parsing
// keeps a value whole whatever it holds (" #", ": ", quotes): it is
// never read as YAML. A scalar written plain is then typed from its
// expanded value, as if written there (a number, a duration); a quoted
// one stays a string. A value holding a line break is refused.
func expandVars(file string, n *yaml.Node, path []any, lookup func(string) (string, bool)) []error {
	var errs []error
	switch n.Kind {
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "${") {
			return nil
		}
		n.Value = varRE.ReplaceAllStringFunc(n.Value, func(m string) string {
			sub := varRE.FindStringSubmatch(m)
			name, hasDefault, def := sub[1], sub[2] != "", sub[3]
			v, ok := lookup(name)
			switch {
			case hasDefault && v == "":
				v = def
			case !ok:
				errs = append(errs, at(file, n.Line, keyPath(path...), fmt.Sprintf("${%s} is not set in the environment (write ${%s:-} to allow it empty)", name, name)))
			}
			if strings.ContainsAny(v, "\r\n") {
				errs = append(errs, at(file, n.Line, keyPath(path...), fmt.Sprintf("${%s} holds a line break; not allowed in the config", name)))
			}
			return v
		})
		if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0 {
			n.Tag = "" // resolved again from the expanded value
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 { // values only
			errs = append(errs, expandVars(file, n.Content[i+1], append(path[:len(path):len(path)], n.Content[i].Value), lookup)...)
		}
	case yaml.DocumentNode:
		for _, c := range n.Content {
			errs = append(errs, expandVars(file, c, path, lookup)...)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			errs = append(errs, expandVars(file, c, append(path[:len(path):len(path)], i), lookup)...)
		}
	}
	return errs
}

// unknownKeys returns an error for every mapping key under n that no
// field of t takes (by its yaml tag): the strict decoding the expanded
// document gets, since yaml decodes a node only leniently.
func unknownKeys(file string, n *yaml.Node, t reflect.Type, path []any) []error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[yaml.Unmarshaler]()) {
		return nil
	}
	var out []error
	switch {
	case n.Kind == yaml.DocumentNode:
		for _, c := range n.Content {
			out = append(out, unknownKeys(file, c, t, path)...)
		}
	case n.Kind == yaml.SequenceNode && t.Kind() == reflect.Slice:
		for i, c := range n.Content {
			out = append(out, unknownKeys(file, c, t.Elem(), append(path[:len(path):len(path)], i))...)
		}
	case n.Kind == yaml.AliasNode && n.Alias != nil:
		out = unknownKeys(file, n.Alias, t, path)
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Struct:
		fields := make(map[string]reflect.Type, t.NumField())
		for f := range t.Fields() {
			if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name != "" && name != "-" {
				fields[name] = f.Type
			}
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			ft, ok := fields[k.Value]
			key := keyPath(append(path[:len(path):len(path)], k.Value)...)
			switch {
			case k.ShortTag() == "!!merge":
				out = append(out, unknownKeys(file, v, t, path)...)
			case !ok && renamedKeys[k.Value] != "":
				out = append(out, at(file, k.Line, key, "unknown key (replaced by "+renamedKeys[k.Value]+")"))
			case !ok:
				out = append(out, at(file, k.Line, key, "unknown key"))
			default:
				out = append(out, unknownKeys(file, v, ft, append(path[:len(path):len(path)], k.Value))...)
			}
		}
	}
	return out
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

// adminToken is one configured admin token and the key it came from.
type adminToken struct {
	value    string
	readOnly bool
	path     []any // its key, for fieldError
}

// adminTokens lists every configured admin token with its key:
// admin_token (when set), admin.tokens, admin.read_only_tokens.
func (c *config) adminTokens() []adminToken {
	var out []adminToken
	if c.AdminToken != "" {
		out = append(out, adminToken{value: c.AdminToken, path: []any{"admin_token"}})
	}
	for i, v := range c.Admin.Tokens {
		out = append(out, adminToken{value: v, path: []any{"admin", "tokens", i}})
	}
	for i, v := range c.Admin.ReadOnlyTokens {
		out = append(out, adminToken{value: v, readOnly: true, path: []any{"admin", "read_only_tokens", i}})
	}
	return out
}

// tokenError names the key of t (or the environment variable it came
// from) in an error.
func (c *config) tokenError(t adminToken, msg string) error {
	return c.fieldError(msg, t.path...)
}

// tokenKey names t's key, or the environment variable that set it.
func (c *config) tokenKey(t adminToken) string {
	key := keyPath(t.path...)
	if env := c.fromEnv[key]; env != "" {
		return env
	}
	return key
}

// validateAdmin checks the admin tokens (each usable, none listed twice,
// none both full and read-only) and that tokenless access is not asked
// for beside them.
func (c *config) validateAdmin() error {
	tokens := c.adminTokens()
	seen := make(map[string]adminToken, len(tokens))
	var keys []string
	for _, t := range tokens {
		if err := admin.CheckToken(t.value); err != nil {
			return c.tokenError(t, err.Error())
		}
		if first, dup := seen[t.value]; dup {
			if first.readOnly != t.readOnly {
				return c.tokenError(t, "the same token is also listed as "+c.tokenKey(first)+": a token is either full or read-only")
			}
			return c.tokenError(t, "duplicates "+c.tokenKey(first))
		}
		seen[t.value] = t
		keys = append(keys, c.tokenKey(t))
	}
	if c.Admin.UnsafeTokenlessLoopback && len(tokens) > 0 {
		return c.fieldError("cannot be combined with admin tokens ("+strings.Join(keys, ", ")+
			" set): with a token admin needs it; remove admin.unsafe_tokenless_loopback or the tokens",
			"admin", "unsafe_tokenless_loopback")
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
		VerifyToken:     v.VerifyToken,
		AllowUnsigned:   v.AllowUnsigned,
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

// fullAdminTokens is admin_token (when set) and admin.tokens.
func (c *config) fullAdminTokens() []string {
	var out []string
	if c.AdminToken != "" {
		out = append(out, c.AdminToken)
	}
	return append(out, c.Admin.Tokens...)
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
	spec := gateway.SourceSpec{Verify: s.verifyConfig(), EventID: s.EventID, EventType: s.EventType, Destinations: len(s.Destinations)}
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
