package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/tracing"
)

// recorder records a delivery of an event; *dedupe.Batcher satisfies it.
type recorder interface {
	Record(ctx context.Context, ev dedupe.Event) (dedupe.Recorded, error)
}

// handoff takes committed events to the queue; *jobs.Relay satisfies it.
// ctx carries the request's span, the hand-off's parent when tracing is
// on.
type handoff interface {
	Notify(ctx context.Context, ref dedupe.EventRef)
}

// Check is a readiness check: nil when the dependency answers.
type Check struct {
	Name string
	Func func(ctx context.Context) error
	// Degrades marks a dependency the process does its job without, for
	// a while: a gateway records webhooks with Redis down (the relay
	// hands them off later). When it fails the process stays ready, and
	// says it is degraded.
	Degrades bool
}

// Config configures the Server.
type Config struct {
	// Sources are the configured senders, by name. With none, the server
	// only serves health and metrics (a worker process).
	Sources Sources
	// Rejected, when set, keeps the requests answered 4xx
	// (GET /admin/rejected); nil keeps none.
	Rejected *RejectedRecorder
	// MaxBodyBytes caps a webhook's body. Defaults to 1 MiB.
	MaxBodyBytes int64
	// MaxBodyBytesInFlight caps the webhook body bytes all requests in
	// flight hold together; a request whose body would pass it is
	// answered 503. Defaults to DefaultMaxBodyBytesInFlight (64 MiB), or
	// 8 × MaxBodyBytes when that is more.
	MaxBodyBytesInFlight int64
	// MaxConnections caps the open connections; one more is answered 503
	// and closed. Defaults to DefaultMaxConnections (4096).
	MaxConnections int
	// RequestTimeout bounds a webhook request, recording included; past it
	// the sender gets 503. Defaults to 10s.
	RequestTimeout time.Duration
	// Readiness checks answer /readyz.
	Readiness []Check
	// Registry gathers /metrics; the gateway's metrics register on it.
	// Defaults to a new registry.
	Registry *prometheus.Registry
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Now returns the time for signature tolerance. Defaults to time.Now.
	Now func() time.Time
	// TracerProvider, when set, traces each webhook (tracing.go); nil
	// turns tracing off.
	TracerProvider trace.TracerProvider
	// HandshakeSecrets stores the secrets senders deliver in their
	// handshakes (asana); nil refuses such handshakes (503).
	HandshakeSecrets handshakeSecrets
}

// DefaultMaxBodyBytes caps a webhook's body where the configuration says
// nothing (`max_body_bytes`).
const DefaultMaxBodyBytes = 1 << 20

// WithDefaults returns a copy of c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxBodyBytesInFlight <= 0 {
		c.MaxBodyBytesInFlight = max(DefaultMaxBodyBytesInFlight, 8*c.MaxBodyBytes)
	}
	if c.MaxConnections <= 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 10 * time.Second
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// maxHeaderBytes bounds a request's line and headers; net/http answers
// 431 past it (its default is 1 MiB). What is stored of them is bounded
// further (maxStoredHeaderBytes).
const maxHeaderBytes = 64 << 10

// Server is the HTTP server.
type Server struct {
	echo     *echo.Echo
	cfg      Config
	recorder recorder
	handoff  handoff
	metrics  *metrics
	bodies   *bodyBudget
	log      *slog.Logger
	tracer   trace.Tracer // nil when tracing is off
	learned  *learnedSecrets
	sources  *SourceTable // cfg.Sources, then what reloads put in force

	// mu guards the HTTP server Serve starts and whether Shutdown came
	// first, so a shutdown that races the start never leaves a server
	// running.
	mu       sync.Mutex
	http     *http.Server
	shutDown bool
}

// New builds the server. rec and h may be nil when cfg has no sources.
func New(cfg Config, rec recorder, h handoff) *Server {
	cfg = cfg.WithDefaults()
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = errorHandler(cfg.Logger)
	s := &Server{
		echo:     e,
		cfg:      cfg,
		recorder: rec,
		handoff:  h,
		metrics:  newMetrics(cfg.Registry),
		bodies:   &bodyBudget{limit: cfg.MaxBodyBytesInFlight},
		log:      cfg.Logger,
		tracer:   tracing.Tracer(cfg.TracerProvider),
		learned:  newLearnedSecrets(cfg.HandshakeSecrets),
		sources:  NewSourceTable(cfg.Sources),
	}
	s.metrics.registerSources(cfg.Sources)
	cfg.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "webhookd_body_bytes_in_flight",
		Help: "Webhook body bytes read by requests not yet answered (at most the in-flight budget; past it, 503).",
	}, func() float64 { return float64(s.bodies.used.Load()) }))
	e.Use(middleware.Recover())
	e.Use(assignRequestID)

	e.GET("/healthz", s.healthz, LimitBody(noBody))
	e.GET("/readyz", s.readyz, LimitBody(noBody))
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{})), LimitBody(noBody))
	if len(cfg.Sources) > 0 && rec != nil {
		// ingest reads at most MaxBodyBytes itself (and counts the 413s).
		mw := []echo.MiddlewareFunc{middleware.ContextTimeout(cfg.RequestTimeout)}
		if s.tracer != nil {
			mw = append([]echo.MiddlewareFunc{s.traceIngest}, mw...)
		}
		e.POST(ingestRoute, s.ingest, mw...)
		// Handshakes only (Meta's subscribe GET); any other GET is a 405.
		// A handshake records nothing, so it starts no trace.
		e.GET(ingestRoute, s.ingest, middleware.ContextTimeout(cfg.RequestTimeout))
		// And the HEAD some senders send to check the URL (Trello,
		// Mandrill).
		e.HEAD(ingestRoute, s.ingest, middleware.ContextTimeout(cfg.RequestTimeout))
	}
	return s
}

// Sources returns the sources in force, for the admin API to read as the
// gateway does.
func (s *Server) Sources() SourceLoader { return s.sources }

// SetSources puts sources in force (a reload): requests that already
// loaded theirs finish with them. A source first named here receives
// only if the server started with one (its route is mounted at New).
func (s *Server) SetSources(sources Sources) {
	s.metrics.registerSources(sources)
	s.sources.Store(sources)
}

// Echo returns the underlying Echo instance, for mounting more routes
// (admin) before Start.
func (s *Server) Echo() *echo.Echo { return s.echo }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }

// Serve accepts connections on l until Shutdown. After Shutdown it closes
// l and returns at once.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.shutDown {
		s.mu.Unlock()
		return l.Close()
	}
	l = &limitListener{Listener: l, max: int64(s.cfg.MaxConnections)}
	srv := &http.Server{
		Handler:           s.echo,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    maxHeaderBytes,
		ReadTimeout:       s.cfg.RequestTimeout + 5*time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.http = srv
	s.mu.Unlock()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("error serving http: %w", err)
	}
	return nil
}

// Shutdown stops accepting and waits for in-flight requests until ctx
// ends. Called before Serve, it makes Serve return at once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.shutDown = true
	srv := s.http
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	return srv.Shutdown(ctx)
}

func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyz runs the readiness checks at once, each within the same 2s: a
// dependency that hangs answers "unreachable" at the deadline, not after
// the others' time added up.
func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	errs := make([]error, len(s.cfg.Readiness))
	var wg sync.WaitGroup
	for i, chk := range s.cfg.Readiness {
		wg.Go(func() { errs[i] = chk.Func(ctx) })
	}
	wg.Wait()
	status := map[string]any{}
	code := http.StatusOK
	for i, chk := range s.cfg.Readiness {
		switch {
		case errs[i] == nil:
			status[chk.Name] = "ok"
		case chk.Degrades:
			status[chk.Name], status["degraded"] = "unreachable", true
		default:
			status[chk.Name] = "unreachable"
			code = http.StatusServiceUnavailable
		}
	}
	return c.JSON(code, status)
}
