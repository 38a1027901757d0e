package jobs_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/testkit/logtest"
	"github.com/webhookd/webhookd/internal/testkit/pgtest"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/internal/testkit/redistest"
	"github.com/webhookd/webhookd/jobs"
)

func testLogger(t testing.TB) *slog.Logger {
	return logtest.New(t, slog.LevelDebug)
}

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// call is one request a destination received.
type call struct {
	Key, Attempt, Source, EventID, ContentType string
	Header                                     http.Header
	Body                                       string
	At                                         time.Time
}

// destination is an httptest.Server whose answers the test scripts.
type destination struct {
	*httptest.Server
	mu      sync.Mutex
	calls   []call
	respond func(n int, r *http.Request, w http.ResponseWriter) // n counts calls from 1
}

func newDestination(t *testing.T, respond func(n int, r *http.Request, w http.ResponseWriter)) *destination {
	t.Helper()
	d := &destination{respond: respond}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		d.mu.Lock()
		d.calls = append(d.calls, call{
			Key: r.Header.Get("Idempotency-Key"), Attempt: r.Header.Get("Webhookd-Attempt"),
			Source: r.Header.Get("Webhookd-Source"), EventID: r.Header.Get("Webhookd-Event-Id"),
			ContentType: r.Header.Get("Content-Type"), Header: r.Header.Clone(), Body: string(body), At: time.Now(),
		})
		n := len(d.calls)
		d.mu.Unlock()
		if d.respond == nil {
			w.WriteHeader(http.StatusOK)
			return
		}
		d.respond(n, r, w)
	}))
	t.Cleanup(d.Close)
	return d
}

func (d *destination) Calls() []call {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]call(nil), d.calls...)
}

// status answers every call with code.
func status(code int) func(int, *http.Request, http.ResponseWriter) {
	return func(_ int, _ *http.Request, w http.ResponseWriter) { w.WriteHeader(code) }
}

// bundle is one test's system under test.
type bundle struct {
	schema  *pgtest.Schema
	store   *dedupe.Store
	handler *jobs.Handler
	routes  jobs.Routes
	logger  *slog.Logger
}

// handlerOptions shape the handler of a bundle.
type handlerOptions struct {
	dest        jobs.DestinationSpec
	lease       time.Duration
	defaultHold time.Duration
	// logger defaults to the test's log.
	logger *slog.Logger
}

func setup(t testing.TB, o handlerOptions) *bundle {
	t.Helper()
	s := pgtest.New(t)
	store := dedupe.New(s.Pool)
	if o.lease == 0 {
		o.lease = time.Minute
	}
	dest := buildDestination(t, o.dest)
	routes := jobs.Routes{"src": {dest.Name: dest}}
	if o.logger == nil {
		o.logger = testLogger(t)
	}
	h := jobs.NewHandler(store, jobs.HandlerConfig{
		Routes:      routes,
		Lease:       o.lease,
		Backoff:     jobs.Backoff{Base: 10 * time.Millisecond, Max: 40 * time.Millisecond},
		DefaultHold: o.defaultHold,
		Logger:      o.logger,
	})
	return &bundle{schema: s, store: store, handler: h, routes: routes, logger: o.logger}
}

// record records an event of source "src".
func (b *bundle) record(t testing.TB, id, body string, order ...string) {
	t.Helper()
	ev := dedupe.Event{Source: "src", ExternalID: id, ContentType: "application/json", Payload: []byte(body)}
	if len(order) == 2 {
		ev.OrderEntity, ev.OrderVersion = order[0], order[1]
	}
	if _, err := dedupe.RecordBatch(testCtx(t), b.schema.Pool, []dedupe.Event{ev}); err != nil {
		t.Fatalf("recording %s: %v", id, err)
	}
}

type runRow struct {
	Status          string
	Attempts, Calls int
	Permanent       bool
	LastError       *string
	Result          *string
	HeldUntil       *time.Time
}

func (b *bundle) run(t *testing.T, key string) runRow {
	t.Helper()
	var r runRow
	err := b.schema.Pool.QueryRow(testCtx(t), `
SELECT status, attempts, calls, permanent, last_error, result::text, held_until FROM job_runs WHERE key = $1`, key).
		Scan(&r.Status, &r.Attempts, &r.Calls, &r.Permanent, &r.LastError, &r.Result, &r.HeldUntil)
	if err != nil {
		t.Fatalf("reading run %s: %v", key, err)
	}
	return r
}

// queue is a running Asynq worker and client on the test's own Redis DB.
type queue struct {
	redis    *redistest.DB
	enqueuer *jobs.Enqueuer
	insp     *asynq.Inspector
}

// startWorker runs b.handler behind a real Asynq server.
func (b *bundle) startWorker(t testing.TB) *queue {
	t.Helper()
	r := redistest.New(t)
	enq := jobs.NewEnqueuer(r.Client, r.Queue, b.routes)
	srv := jobs.NewServer(r.Client, b.handler, jobs.ServerConfig{
		Queues: []string{r.Queue}, Concurrency: 8, ShutdownTimeout: 2 * time.Second,
		Backoff: jobs.Backoff{Base: 10 * time.Millisecond, Max: 40 * time.Millisecond},
		Logger:  b.logger,
	})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	insp := asynq.NewInspectorFromRedisClient(r.Client)
	return &queue{redis: r, enqueuer: enq, insp: insp}
}

// status returns a run's status, or "" while it has no row.
func (b *bundle) status(t testing.TB, key string) string {
	t.Helper()
	var s string
	_ = b.schema.Pool.QueryRow(testCtx(t), `SELECT status FROM job_runs WHERE key = $1`, key).Scan(&s)
	return s
}

// buildDestination builds spec as the configuration would (name "dst" and
// an unreachable URL when unset), failing the test on a problem.
func buildDestination(t testing.TB, spec jobs.DestinationSpec) jobs.Destination {
	t.Helper()
	if spec.Name == "" {
		spec.Name = "dst"
	}
	if spec.URL == "" {
		spec.URL = "http://127.0.0.1:1/"
	}
	d, err := jobs.NewDestination(spec, jobs.DestinationOptions{SourceHasEventType: true})
	if err != nil {
		t.Fatalf("destination %s: %v", spec.Name, err)
	}
	return d
}

// deliverEvents starts a worker, records n events evt_0… with the body
// {"id": id}, hands them off and waits until every run is done.
func (b *bundle) deliverEvents(t *testing.T, n int, within time.Duration) *queue {
	t.Helper()
	q := b.startWorker(t)
	var refs []dedupe.EventRef
	for i := range n {
		id := fmt.Sprintf("evt_%d", i)
		b.record(t, id, fmt.Sprintf(`{"id":%q}`, id))
		refs = append(refs, dedupe.EventRef{Source: "src", ExternalID: id})
	}
	if _, err := q.enqueuer.EnqueueEvents(testCtx(t), refs); err != nil {
		t.Fatal(err)
	}
	pipelinetest.Eventually(t, within, "every run done", func() bool {
		return b.schema.Int(t, `SELECT count(*) FROM job_runs WHERE status = 'done'`) == n
	})
	return q
}
