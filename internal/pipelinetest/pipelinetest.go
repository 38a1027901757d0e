// Package pipelinetest wires a whole webhookd pipeline in one test process
// (gateway, group commit, relay, worker) against the test's own Postgres
// schema and Redis DB, with real destinations given as URLs.
package pipelinetest

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway"
	"github.com/webhookd/webhookd/gateway/eventid"
	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/logtest"
	"github.com/webhookd/webhookd/internal/pgtest"
	"github.com/webhookd/webhookd/internal/redistest"
	"github.com/webhookd/webhookd/jobs"
)

// Secret signs the test source's webhooks (Stripe scheme).
const Secret = "whsec_pipeline_test"

// Source is the test source's name.
const Source = "stripe"

// SourceSpec is one configured source of the pipeline.
type SourceSpec struct {
	// Name is the :source path segment.
	Name string
	// Verify is the source's verification. A twilio source without
	// PublicURL gets the test server's URL + /webhooks/<Name>.
	Verify verify.Config
	// EventID is the event id spec; "" means the scheme's default.
	EventID string
	// Destinations maps destination names to URLs.
	Destinations map[string]string
}

// Options adjust the pipeline.
type Options struct {
	// RecoveryMinAge is the age at which the reconciler looks at an event
	// no worker has claimed. Defaults to 500ms.
	RecoveryMinAge time.Duration
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
	// Logger receives the pipeline's logs. Defaults to the test's log.
	Logger *slog.Logger
	// Schema and Redis reuse existing ones (a second replica).
	Schema *pgtest.Schema
	Redis  *redistest.DB
}

// Pipeline is a running in-process webhookd.
type Pipeline struct {
	Schema   *pgtest.Schema
	Redis    *redistest.DB
	Store    *dedupe.Store
	Enqueuer *jobs.Enqueuer
	Relay    *jobs.Relay
	// Reconciler runs a pass every 200ms; tests may call Pass too.
	Reconciler *jobs.Reconciler
	Server     *httptest.Server
	// Verify is the default Stripe source's verification (for Send).
	Verify verify.Config
	// Sources holds every source's verification as configured (twilio's
	// PublicURL filled in), by name.
	Sources map[string]verify.Config
	Routes  jobs.Routes
}

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
	log := opts.Logger
	if log == nil {
		log = logtest.New(t, slog.LevelInfo)
	}
	ctx, cancel := context.WithCancel(context.Background())

	store := dedupe.New(opts.Schema.Pool)
	batcher := dedupe.NewBatcher(opts.Schema.Pool, dedupe.BatcherConfig{})
	defaultVerify := verify.Config{Scheme: "stripe", Secrets: []string{Secret}}
	specs := opts.Sources
	if len(specs) == 0 {
		specs = []SourceSpec{{Name: Source, Verify: defaultVerify, EventID: "json:id", Destinations: opts.Destinations}}
	}
	routes := jobs.Routes{}
	for _, spec := range specs {
		routes[spec.Name] = map[string]jobs.Destination{}
		for name, url := range spec.Destinations {
			routes[spec.Name][name] = jobs.Destination{Name: name, URL: url, Timeout: 5 * time.Second, MaxAttempts: opts.MaxAttempts}.WithDefaults()
		}
	}
	enq := jobs.NewEnqueuer(opts.Redis.Client, opts.Redis.Queue, routes)
	if opts.RecoveryMinAge == 0 {
		opts.RecoveryMinAge = 500 * time.Millisecond
	}
	relay := jobs.NewRelay(enq, jobs.RelayConfig{Logger: log})
	reconciler := jobs.NewReconciler(store, enq, jobs.ReconcilerConfig{
		Interval: 200 * time.Millisecond, Lease: opts.Lease, MinAge: opts.RecoveryMinAge, Logger: log,
	})
	var background sync.WaitGroup
	background.Go(func() { relay.Run(ctx) })
	background.Go(func() { reconciler.Run(ctx) })

	var (
		worker *jobs.Server
		runs   *dedupe.RunBatcher
	)
	if !opts.NoWorker {
		runs = dedupe.NewRunBatcher(store, dedupe.BatcherConfig{})
		handler := jobs.NewHandler(runs, jobs.HandlerConfig{
			Routes: routes, Lease: opts.Lease, Backoff: jobs.Backoff{Base: 100 * time.Millisecond, Max: time.Second}, Logger: log,
		})
		worker = jobs.NewServer(opts.Redis.Client, handler, jobs.ServerConfig{Queue: opts.Redis.Queue, Concurrency: 16, ShutdownTimeout: 5 * time.Second, Logger: log})
		if err := worker.Start(); err != nil {
			t.Fatalf("starting worker: %v", err)
		}
	}

	// The listener exists before the server starts, so a twilio source
	// can be told the URL it is reached at.
	ts := httptest.NewUnstartedServer(nil)
	baseURL := "http://" + ts.Listener.Addr().String()
	sources := make(map[string]gateway.Source, len(specs))
	vcfgs := make(map[string]verify.Config, len(specs))
	for _, spec := range specs {
		vcfg := spec.Verify
		if vcfg.Scheme == verify.SchemeTwilio && vcfg.PublicURL == "" {
			vcfg.PublicURL = baseURL + "/webhooks/" + spec.Name
		}
		v, err := verify.New(vcfg)
		if err != nil {
			t.Fatalf("source %s: %v", spec.Name, err)
		}
		idSpec := spec.EventID
		if idSpec == "" {
			idSpec = verify.DefaultEventID(vcfg.Scheme)
		}
		id, err := eventid.Parse(idSpec)
		if err != nil {
			t.Fatalf("source %s: %v", spec.Name, err)
		}
		src := gateway.Source{Scheme: vcfg.Scheme, Verifier: v, EventID: id, Destinations: len(routes[spec.Name]),
			SignatureHeader: vcfg.WithDefaults().Header}
		if opts.OrderEntity != "" {
			e, _ := eventid.Parse(opts.OrderEntity)
			ver, _ := eventid.Parse(opts.OrderVersion)
			src.OrderEntity, src.OrderVersion = &e, &ver
		}
		sources[spec.Name] = src
		vcfgs[spec.Name] = vcfg
	}
	srv := gateway.New(gateway.Config{
		Sources:      sources,
		MaxBodyBytes: 64 << 10,
		Registry:     prometheus.NewRegistry(),
		Logger:       log,
	}, batcher, relay)
	ts.Config.Handler = srv
	ts.Start()

	t.Cleanup(func() {
		ts.Close()
		batcher.Close()
		cancel()
		background.Wait()
		if worker != nil {
			worker.Shutdown()
			runs.Close()
		}
	})
	return &Pipeline{Schema: opts.Schema, Redis: opts.Redis, Store: store, Enqueuer: enq, Relay: relay, Reconciler: reconciler, Server: ts, Verify: defaultVerify, Sources: vcfgs, Routes: routes}
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
	req, err := http.NewRequest(http.MethodPost, p.Server.URL+path, bytes.NewReader(body))
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
