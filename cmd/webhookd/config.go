package main

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
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
	// Respond overrides the answer to a recorded delivery; unset keeps
	// the scheme's (gateway.SourceSpec.Respond).
	Respond *respondConf `yaml:"respond"`
	// MaxBodyBytes caps this source's bodies; 0 keeps the top-level
	// max_body_bytes.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
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
	// Algorithm, SignatureKey, TimestampKey, TimestampFormat: the
	// generic hmac scheme's (verify.Config).
	Algorithm       string `yaml:"algorithm"`
	SignatureKey    string `yaml:"signature_key"`
	TimestampKey    string `yaml:"timestamp_key"`
	TimestampFormat string `yaml:"timestamp_format"`
	// SubscriptionConfirmation is sns's: confirm (default) or show.
	SubscriptionConfirmation string `yaml:"subscription_confirmation"`
}

// respondConf is the answer a source's sender expects (adyen's
// "[accepted]").
type respondConf struct {
	Status      int    `yaml:"status"`
	Body        string `yaml:"body"`
	ContentType string `yaml:"content_type"`
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
