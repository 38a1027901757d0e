// Package pipelinetest runs a whole webhookd process in the test process
// (webhookd.Start: gateway, hand-off, reconciler, worker, admin) against
// the test's own Postgres schema and Redis DB, with real destinations
// given as URLs.
package pipelinetest

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/webhookd/webhookd"
	"github.com/webhookd/webhookd/alerts"
	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway"
	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/testkit/freeport"
	"github.com/webhookd/webhookd/internal/testkit/logtest"
	"github.com/webhookd/webhookd/internal/testkit/pgtest"
	"github.com/webhookd/webhookd/internal/testkit/redistest"
	"github.com/webhookd/webhookd/jobs"
)

// PublicURLHere, as a source's PublicURL, stands for the URL the
// pipeline serves it at (test server's URL + /webhooks/<Name>).
const PublicURLHere = "{url}"

// Secret signs the test source's webhooks (Stripe scheme).
const Secret = "whsec_pipeline_test"

// Source is the test source's name.
const Source = "stripe"

// SourceSpec is one configured source of the pipeline.
type SourceSpec struct {
	// Name is the :source path segment.
	Name string
	// Verify is the source's verification. A twilio or square source without
	// PublicURL gets the test server's URL + /webhooks/<Name>.
	Verify verify.Config
	// EventID is the event id spec; "" means the scheme's default.
	EventID string
	// EventType is the event type spec; "" means the scheme's default.
	EventType string
	// Destinations maps destination names to URLs.
	Destinations map[string]string
	// Respond and MaxBodyBytes are the source's respond and
	// max_body_bytes.
	Respond      *verify.Response
	MaxBodyBytes int64
	// Tune, when set, adjusts each destination's spec before it is built
	// (its filter, forward_headers, signing_secret, …).
	Tune func(d *jobs.DestinationSpec)
}

// Options adjust the pipeline.
type Options struct {
	// RecoveryMinAge is the age at which the reconciler looks at an event
	// no worker has claimed. Defaults to 500ms.
	RecoveryMinAge time.Duration
	// AdminTokens, when set, turn on the process's admin surface with
	// these full-access tokens (for the operator commands' tests).
	AdminTokens []string
	// AdminReadOnlyTokens are read-only admin tokens beside them.
	AdminReadOnlyTokens []string
	// Destinations maps destination names to URLs of the default Stripe
	// source (Source, signed with Secret). Required unless Sources is set.
	Destinations map[string]string
	// Sources, when set, replace the default Stripe source.
	Sources []SourceSpec
	// MaxAttempts applies to every destination. Defaults to 5.
	MaxAttempts int
	// Lease defaults to 30s.
	Lease time.Duration
	// NoWorker leaves the worker out (to inspect the queue).
	NoWorker bool
	// Order, when set, orders every source's events by these json: paths.
	OrderEntity, OrderVersion string
	// OrderMode and OrderOnFailure are order's mode and on_failure.
	OrderMode, OrderOnFailure string
	// ReorderWindow is order's reorder_window.
	ReorderWindow time.Duration
	// Logger receives the pipeline's logs. Defaults to the test's log.
	Logger *slog.Logger
	// Issues tunes the worker's issues (webhookd.Config.Issues).
	Issues jobs.IssuesConfig
	// Alerts, with channels, sends messages about issues
	// (webhookd.Config.Alerts).
	Alerts alerts.NotifierConfig
	// Schema and Redis reuse existing ones (a second replica).
	Schema *pgtest.Schema
	Redis  *redistest.DB
}

// Pipeline is a running in-process webhookd: the process webhookd.Start
// assembles, as deployed, with test-sized intervals.
type Pipeline struct {
	Schema *pgtest.Schema
	Redis  *redistest.DB
	// Process is the running process.
	Process *webhookd.Process
	// URL is the process's base URL.
	URL string
	// Store and Enqueuer work on the pipeline's Postgres schema and
	// queue, for tests that act as another process would.
	Store    *dedupe.Store
	Enqueuer *jobs.Enqueuer
	// Verify is the default Stripe source's verification (for Send).
	Verify verify.Config
	// Sources holds every source's verification as configured (twilio's
	// PublicURL filled in), by name.
	Sources map[string]verify.Config
	Routes  jobs.Routes
}

// DefaultVerify is the default Stripe source's verification (Secret).
func DefaultVerify() verify.Config { return verify.Config{Scheme: "stripe", Secrets: []string{Secret}} }

// Start starts a pipeline; everything stops at test cleanup.
func Start(t testing.TB, opts Options) *Pipeline {
	t.Helper()
	if opts.Schema == nil {
		opts.Schema = pgtest.New(t)
	}
	if opts.Redis == nil {
		opts.Redis = redistest.New(t)
	}
	if opts.MaxAttempts == 0 {
		opts.MaxAttempts = 5
	}
	if opts.Lease == 0 {
		opts.Lease = 30 * time.Second
	}
	if opts.RecoveryMinAge == 0 {
		opts.RecoveryMinAge = 500 * time.Millisecond
	}
	log := opts.Logger
	if log == nil {
		log = logtest.New(t, slog.LevelInfo)
	}
	defaultVerify := DefaultVerify()
	specs := opts.Sources
	if len(specs) == 0 {
		specs = []SourceSpec{{Name: Source, Verify: defaultVerify, EventID: "json:id", Destinations: opts.Destinations}}
	}
	// The address is chosen first, so a twilio source can be told the URL
	// it is reached at.
	port, err := freeport.Pick()
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	baseURL := "http://" + addr
	vcfgs := make(map[string]verify.Config, len(specs))
	sourceSpecs := make([]webhookd.SourceSpec, 0, len(specs))
	for _, spec := range specs {
		vcfg := spec.Verify
		if (vcfg.Scheme == verify.SchemeTwilio || vcfg.Scheme == verify.SchemeSquare) && vcfg.PublicURL == "" || vcfg.PublicURL == PublicURLHere {
			vcfg.PublicURL = baseURL + "/webhooks/" + spec.Name
		}
		vcfgs[spec.Name] = vcfg
		ss := webhookd.SourceSpec{Name: spec.Name, SourceSpec: gateway.SourceSpec{Verify: vcfg, EventID: spec.EventID, EventType: spec.EventType,
			Respond: spec.Respond, MaxBodyBytes: spec.MaxBodyBytes}}
		if opts.OrderEntity != "" {
			ss.Order = &gateway.OrderSpec{Entity: opts.OrderEntity, Version: opts.OrderVersion, Mode: opts.OrderMode, OnFailure: opts.OrderOnFailure,
				ReorderWindow: opts.ReorderWindow}
		}
		for _, name := range slices.Sorted(maps.Keys(spec.Destinations)) {
			d := jobs.DestinationSpec{Name: name, URL: spec.Destinations[name], Timeout: 5 * time.Second, MaxAttempts: opts.MaxAttempts}
			if spec.Tune != nil {
				spec.Tune(&d)
			}
			ss.Destinations = append(ss.Destinations, d)
		}
		sourceSpecs = append(sourceSpecs, ss)
	}
	// Built as the configuration builds them: the one assembly of sources.
	sources, err := webhookd.NewSources(sourceSpecs, webhookd.SourcesOptions{Lease: opts.Lease})
	if err != nil {
		t.Fatalf("sources: %v", err)
	}
	routes := sources.Routes

	backoff := jobs.Backoff{Base: 100 * time.Millisecond, Max: time.Second}
	proc, err := webhookd.Start(context.Background(), webhookd.Config{
		Listen:       addr,
		DatabaseURL:  opts.Schema.URL,
		Redis:        webhookd.RedisConfig{URL: opts.Redis.URL},
		Queue:        opts.Redis.Queue,
		Roles:        webhookd.Roles{Gateway: true, Worker: !opts.NoWorker},
		Lease:        opts.Lease,
		MaxBodyBytes: 64 << 10,
		Sources:      sources,
		Worker:       webhookd.WorkerConfig{Concurrency: 16, Backoff: backoff, ShutdownTimeout: 5 * time.Second},
		Recovery:     jobs.ReconcilerConfig{Interval: 200 * time.Millisecond, MinAge: opts.RecoveryMinAge},
		Admin:        webhookd.AdminConfig{Tokens: opts.AdminTokens, ReadOnlyTokens: opts.AdminReadOnlyTokens},
		Issues:       opts.Issues,
		Alerts:       opts.Alerts,
	}, log)
	if err != nil {
		t.Fatalf("starting webhookd: %v", err)
	}
	t.Cleanup(func() {
		if err := proc.Stop(context.Background()); err != nil {
			t.Errorf("stopping webhookd: %v", err)
		}
	})
	return &Pipeline{
		Schema: opts.Schema, Redis: opts.Redis, Process: proc, URL: baseURL,
		Store: dedupe.New(opts.Schema.Pool), Enqueuer: jobs.NewEnqueuer(opts.Redis.Client, opts.Redis.Queue, routes),
		Verify: defaultVerify, Sources: vcfgs, Routes: routes,
	}
}

// Send signs body as Stripe would and posts it to the test source.
func (p *Pipeline) Send(t testing.TB, body []byte) (int, []byte) {
	t.Helper()
	h, _, err := verify.Sign(p.Verify, body, time.Now(), "")
	if err != nil {
		t.Fatal(err)
	}
	return p.Post(t, "/webhooks/"+Source, h, body)
}

// Post posts body with headers to path (which may carry a query) on the
// gateway. Content-Type defaults to application/json.
func (p *Pipeline) Post(t testing.TB, path string, h http.Header, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, p.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("post: %v", err)
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// Eventually polls cond every 50ms until it holds or timeout passes.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
