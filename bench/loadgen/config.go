package loadgen

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/webhookd/webhookd/gateway/verify"
)

// Source is the sender the generator imitates: the source name in the
// URL, how to sign, and where the event id is.
type Source struct {
	// Name is the :source path segment. Defaults to "bench".
	Name string
	// Verify is the source's verification config; requests are signed
	// with verify.Sign using its first secret.
	Verify verify.Config
	// EventID is the source's event id spec (json:<path> or header:<Name>).
	// Defaults to the scheme's default, or header:X-Bench-Event-Id for
	// schemes without one.
	EventID string
	// Destination is the name of the source's one destination; the sink
	// sees keys <Name>:<Destination>:<event id>. Defaults to "sink".
	Destination string
}

// BenchSource returns the source used against an in-process server for
// scheme: a generated secret of the scheme's form and its default event
// id. twilio (it signs the URL, not a body), msgraph, linear, mailgun,
// adyen and square are not supported.
func BenchSource(scheme string) (Source, error) {
	s := Source{Name: "bench", Destination: "sink", Verify: verify.Config{Scheme: scheme}}
	switch scheme {
	case verify.SchemeStandard:
		s.Verify.Secrets = []string{"whsec_" + base64.StdEncoding.EncodeToString([]byte("webhookd-bench-secret-0123456789"))}
	case verify.SchemeNone:
		s.Verify.AllowUnsigned = true
	case verify.SchemeStripe, verify.SchemeGitHub, verify.SchemeShopify, verify.SchemeSlack, verify.SchemeHMACSHA256,
		verify.SchemeZoom, verify.SchemePaddle, verify.SchemeRazorpay:
		s.Verify.Secrets = []string{"whsec_webhookd_bench_secret"}
	case verify.SchemeMeta:
		s.Verify.Secrets = []string{"whsec_webhookd_bench_secret"}
		s.Verify.VerifyToken = "webhookd-bench-verify-token"
	case verify.SchemeGitLab:
		s.Verify.Secrets = []string{"webhookd-bench-token"}
	case verify.SchemeTelegram:
		s.Verify.Secrets = []string{"webhookd-bench-token"}
		s.EventID = "json:id" // the generated bodies carry no update_id
	case verify.SchemeSendGrid:
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return Source{}, fmt.Errorf("generating a sendgrid key: %w", err)
		}
		pub, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
		priv, _ := x509.MarshalECPrivateKey(k)
		s.Verify.Secrets = []string{base64.StdEncoding.EncodeToString(pub)}
		s.Verify.SigningKey = base64.StdEncoding.EncodeToString(priv)
	case verify.SchemeDiscord:
		seed := sha256.Sum256([]byte("webhookd-bench-key"))
		key := ed25519.NewKeyFromSeed(seed[:])
		s.Verify.Secrets = []string{hex.EncodeToString(key.Public().(ed25519.PublicKey))}
		s.Verify.SigningKey = hex.EncodeToString(seed[:])
	case verify.SchemeTwilio:
		return Source{}, errors.New("scheme twilio is not supported by the load generator")
	case verify.SchemeMSGraph, verify.SchemeLinear, verify.SchemeSquare, verify.SchemeMailgun, verify.SchemeAdyen:
		return Source{}, fmt.Errorf("scheme %s is not supported by the load generator (it checks what the generated bodies lack: msgraph's clientState, linear's webhookTimestamp, mailgun's and adyen's signatures, or square's URL)", scheme)
	default:
		return benchSender(s)
	}
	return s.withDefaults(), nil
}

// benchSender is BenchSource for the senders of issue 32: a secret of
// the scheme's form; the event id the generated body carries ("id") for
// every scheme whose default id is elsewhere in the body.
func benchSender(s Source) (Source, error) {
	switch s.Verify.Scheme {
	case verify.SchemeSNS:
		return Source{}, errors.New("scheme sns is not supported by the load generator (AWS signs its messages)")
	case verify.SchemeHubSpot, verify.SchemeTrello, verify.SchemeContentful, verify.SchemeMailchimp:
		return Source{}, fmt.Errorf("scheme %s is not supported by the load generator (it signs the URL it posts to)", s.Verify.Scheme)
	case verify.SchemeTelnyx:
		seed := sha256.Sum256([]byte("webhookd-bench-key"))
		key := ed25519.NewKeyFromSeed(seed[:])
		s.Verify.Secrets = []string{base64.StdEncoding.EncodeToString(key.Public().(ed25519.PublicKey))}
		s.Verify.SigningKey = hex.EncodeToString(seed[:])
	case verify.SchemePostmark, verify.SchemePipedrive:
		s.Verify.Secrets = []string{"bench:webhookd-bench-password"}
	case verify.SchemeClerk, verify.SchemeResend:
		s.Verify.Secrets = []string{"whsec_" + base64.StdEncoding.EncodeToString([]byte("webhookd-bench-secret-0123456789"))}
	default:
		if !slices.Contains(verify.Schemes, s.Verify.Scheme) {
			return Source{}, fmt.Errorf("unknown scheme %q", s.Verify.Scheme)
		}
		s.Verify.Secrets = []string{"whsec_webhookd_bench_secret"}
	}
	if id := verify.SchemeDefaults(s.Verify.Scheme).EventID; strings.HasPrefix(id, "json:") {
		s.EventID = "json:id"
	}
	return s.withDefaults(), nil
}

func (s Source) withDefaults() Source {
	if s.Name == "" {
		s.Name = "bench"
	}
	if s.Destination == "" {
		s.Destination = "sink"
	}
	if s.EventID == "" {
		s.EventID = verify.SchemeDefaults(s.Verify.Scheme).EventID
	}
	if s.EventID == "" {
		s.EventID = "header:X-Bench-Event-Id"
	}
	if s.EventID == "body-sha256" {
		// The exactly-once check reads the id the generator writes; the
		// generated bodies carry it as "id".
		s.EventID = "json:id"
	}
	return s
}

// Env is what the system under test is pointed at.
type Env struct {
	// DatabaseURL is a migrated database (a search_path parameter may
	// select a schema).
	DatabaseURL string
	// RedisURL selects the Redis database.
	RedisURL string
	// Queue is the Asynq queue to use.
	Queue string
	// Source is the one configured source.
	Source Source
	// SinkURL is the destination's URL.
	SinkURL string
	// Listen is the address webhookd listens on. Defaults to a free
	// loopback port.
	Listen string
	// Gateway is false in naive mode: start only the worker side
	// (claim, forward, sweep); the naive ingest replaces the gateway.
	Gateway bool
	// Worker is false with Config.NoWorker: nothing drains the queue.
	Worker bool
	// Rules are the destination's `when` and `transform` (Config.Rules).
	Rules Rules
	// Log receives the process's logs.
	Log *slog.Logger
}

// Rules are a destination's CEL rules, to measure what they cost end to
// end; empty strings leave a rule off.
type Rules struct {
	// When is the destination's `when`.
	When string
	// Transform is the destination's `transform`.
	Transform string
}

// Config configures a run.
type Config struct {
	// Label names the run in its report (Report.Label); by convention
	// <kind>/<variant>, e.g. "ack64/webhookd". Optional.
	Label string

	// Target is the base URL of a running gateway. Empty means: prepare
	// the environment and start webhookd in this process (webhookd.Start).
	Target string
	// Listen is the address the in-process system under test (webhookd's
	// gateway, or the naive ingest) listens on. Defaults to a free
	// loopback port. Serve needs one an outside generator can be
	// pointed at.
	Listen string

	// Concurrency is the number of requests in flight (closed loop), or
	// the number of connections sending (open loop). Defaults to 64.
	Concurrency int
	// Rate, when positive, selects the open loop: requests per second at
	// steady spacing, latency measured from each request's intended send
	// time.
	Rate float64
	// Duration is how long to send. Defaults to 10s.
	Duration time.Duration
	// Duplicates is the share (0..1) of requests that repeat an
	// already-sent event id (preloaded ids included).
	Duplicates float64
	// BadSignatures is the share (0..1) of requests sent with a wrong
	// signature (ids of their own, never acknowledged): the gateway
	// answers 401 and records them as rejected requests. The check and
	// the end-to-end figures cover the others.
	BadSignatures float64
	// BodySize is the body's size in bytes. Defaults to 1024.
	BodySize int
	// Source is the source to send to. Defaults to BenchSource("stripe").
	Source *Source

	// DatabaseURL locates Postgres. In-process, the database it names is
	// dropped and created again when FreshDatabase is set; otherwise it
	// is used as it is (for example a test schema) and migrated. With
	// Target, when set, the events table is checked at the end.
	DatabaseURL string
	// FreshDatabase drops and creates the database named in DatabaseURL
	// at the start (and drops it at the end unless KeepDatabase).
	FreshDatabase bool
	// ReuseDatabase keeps an existing database from an earlier run with
	// KeepDatabase: preloaded rows stay (so a large preload is paid once),
	// everything else is reset.
	ReuseDatabase bool
	// KeepDatabase leaves the database in place at the end.
	KeepDatabase bool
	// RedisURL locates Redis. Defaults to redis://127.0.0.1:6379/0.
	RedisURL string
	// Queue is the Asynq queue; its keys are deleted at start and end.
	// Defaults to "bench".
	Queue string
	// SinkURL, with Target, is a running sink whose GET /stats is read
	// for the end-to-end figures and the check.
	SinkURL string

	// NoWorker starts the system under test without its worker, so the
	// acks are measured without deliveries competing for the CPU. Nothing
	// is delivered: the end-to-end figures and the sink checks are
	// skipped.
	NoWorker bool

	// Rules are the in-process destination's rules; off by default.
	Rules Rules

	// Naive replaces webhookd's ingest with NaiveServer.
	Naive bool
	// NaivePool is the naive ingest's pgxpool size. Defaults to 32.
	NaivePool int

	// Preload inserts this many events (ids evt_pre_<n>, already handed
	// off) before sending, with COPY.
	Preload int64

	// DrainTimeout bounds the wait for the queue to drain after sending.
	// Defaults to 2m.
	DrainTimeout time.Duration

	// CPUProfile, when set, receives a CPU profile of the sending phase.
	CPUProfile io.Writer
	// Progress, when set, shows progress bars (a terminal, usually stderr).
	Progress io.Writer
	// Log receives the generator's own log lines and is handed to the
	// system under test. Defaults to a logger that discards.
	Log *slog.Logger
}

// WithDefaults returns a copy of c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Concurrency <= 0 {
		c.Concurrency = 64
	}
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.BodySize <= 0 {
		c.BodySize = 1024
	}
	if c.Source == nil {
		s, _ := BenchSource(verify.SchemeStripe)
		c.Source = &s
	} else {
		s := c.Source.withDefaults()
		c.Source = &s
	}
	if c.RedisURL == "" {
		c.RedisURL = "redis://127.0.0.1:6379/0"
	}
	if c.Queue == "" {
		c.Queue = "bench"
	}
	if c.NaivePool <= 0 {
		c.NaivePool = 32
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 2 * time.Minute
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate returns an error naming the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Target == "" && c.DatabaseURL == "":
		return errors.New("loadgen: DatabaseURL is required without Target")
	case c.Target != "" && (c.Naive || c.Preload > 0 || c.FreshDatabase):
		return errors.New("loadgen: Naive, Preload and FreshDatabase need the in-process server, not Target")
	case c.Duplicates < 0 || c.Duplicates > 1:
		return fmt.Errorf("loadgen: Duplicates must be within 0..1, not %v", c.Duplicates)
	case c.BadSignatures < 0 || c.BadSignatures >= 1:
		return fmt.Errorf("loadgen: BadSignatures must be within 0..1 (1 excluded), not %v", c.BadSignatures)
	case c.Rate < 0:
		return errors.New("loadgen: Rate must not be negative")
	case c.Preload < 0:
		return errors.New("loadgen: Preload must not be negative")
	case c.Target != "" && c.NoWorker:
		return errors.New("loadgen: NoWorker needs the in-process server, not Target")
	case c.Target != "" && c.Listen != "":
		return errors.New("loadgen: Listen needs the in-process server, not Target")
	}
	if c.Source != nil && c.Source.Verify.Scheme == verify.SchemeTwilio {
		return errors.New("loadgen: scheme twilio is not supported")
	}
	return nil
}
