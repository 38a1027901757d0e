package admin

import (
	"context"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway"
	"github.com/webhookd/webhookd/internal/textfield"
	"github.com/webhookd/webhookd/jobs"
)

// eventStore reads events for the listing, the event page and the event
// stream; *dedupe.Store satisfies it.
type eventStore interface {
	ListEvents(ctx context.Context, f dedupe.EventFilter) (dedupe.EventPage, error)
	CountEvents(ctx context.Context, f dedupe.EventFilter) (dedupe.EventCount, error)
	GetEvent(ctx context.Context, source, externalID string, view dedupe.DestinationView) (dedupe.EventDetail, error)
	ReadFeed(ctx context.Context, r dedupe.FeedRequest) (dedupe.FeedPage, error)
	FeedHead(ctx context.Context) (dedupe.FeedCursor, error)
	FeedSince(ctx context.Context, t time.Time) (dedupe.FeedCursor, error)
	FeedBacklog(ctx context.Context, c dedupe.FeedCursor, f dedupe.FeedFilter, most int) (int, bool, error)
	RuleSamples(ctx context.Context, source string, since time.Time, limit int) ([]dedupe.RuleSample, error)
	ListRejected(ctx context.Context, source string, before int64, limit int) ([]dedupe.Rejected, error)
	DestinationHealth(ctx context.Context, keyPrefix string, since time.Time, step time.Duration) (dedupe.DestinationHealth, error)
	RecentCallErrors(ctx context.Context, keyPrefix string, since time.Time, limit int) ([]dedupe.CallError, error)
	AffectedEvents(ctx context.Context, keyPrefix string, since time.Time, limit int) ([]dedupe.AffectedEvent, error)
	HeldEntities(ctx context.Context, source, destination string, limit int) ([]dedupe.HeldEntity, error)
}

// Config configures the admin surface.
type Config struct {
	// Tokens are the full-access admin tokens (several while rotating):
	// a request carries one as "Authorization: Bearer <token>" or signs
	// in with it for a session cookie. With no token of either kind and
	// UnsafeTokenlessLoopback unset, admin is off: every route answers
	// 403. See CheckToken for what a token must be; empty ones are
	// ignored.
	Tokens []string
	// ReadOnlyTokens may read everything (API, pages, dashboard) but
	// change nothing: replays, pauses, resumes and dashboard actions
	// answer 403 to them, and the pages hide those controls.
	ReadOnlyTokens []string
	// UnsafeTokenlessLoopback, with no token configured, lets admin answer
	// without a token, but only loopback peers, and only requests whose
	// Host (and Origin, when sent) is a loopback address, localhost or
	// one of Hosts: a web page that DNS rebinding points at 127.0.0.1 is
	// refused. A reverse proxy on the same host makes every request a
	// loopback peer; hence the name. Ignored when a token is set.
	UnsafeTokenlessLoopback bool
	// Hosts are more host names (lower case, without port) that a
	// tokenless admin answers to, such as the listen address's name.
	Hosts []string
	// SecureCookie marks the session cookie Secure whatever the request
	// came over: behind a TLS-terminating proxy webhookd sees plain HTTP
	// (it trusts no X-Forwarded-Proto, which a client can set). Without
	// it the cookie is Secure when the request came over TLS.
	SecureCookie bool
	// SessionTTL is how long a browser's sign-in lasts (the session
	// cookie's Max-Age, also checked by the server). Defaults to 12h.
	SessionTTL time.Duration
	// Now returns the time for session expiry and the throttle. Defaults
	// to time.Now.
	Now func() time.Time
	// WrongTokenBurst is how many wrong tokens or sessions a client
	// address may present before it is answered 429; one more try comes
	// back every 3s (throttle.go). Defaults to 10.
	WrongTokenBurst int
	// Routes are the configured sources and their destinations, for the
	// filters and the pages (the Replayer has its own).
	Routes jobs.RouteSource
	// Sources are the configured senders: the event stream says how each
	// signs (gateway.Source.Signing), never with what secret, and each
	// source's own signature header (gateway.Source.SignatureHeader) is
	// shown masked where a destination forwards it and so it is stored
	// as sent.
	Sources gateway.SourceLoader
	// Reload, when set, reads the configuration again and puts it in
	// force (POST /admin/reload); nil answers 409.
	Reload Reloader
	// Dashboard, when set, is served at /admin/queues/ behind the same
	// check (see NewDashboard).
	Dashboard http.Handler
	// ReadOnlyDashboard, when set, is the dashboard read-only sessions
	// see instead (NewDashboard in read-only mode hides its action
	// buttons); without it they see Dashboard, and its actions answer 403.
	ReadOnlyDashboard http.Handler
	// Destinations, when set, lists the destinations and pauses and
	// resumes them (/admin/destinations, /admin/view/destinations).
	Destinations destinationControl
	// TestEvents, when set, sends test events from a destination's page
	// (POST /admin/destinations/:source/:name/test and the page's form).
	TestEvents testEventSender
	// Issues, when set, lists, shows and resolves issues (/admin/issues).
	Issues issueStore
	// BulkLimit is the most events one bulk replay call may act on, what
	// ever the request asks. Defaults to 1000 (also the maximum); a request
	// without a limit acts on at most 100.
	BulkLimit int
	// Logger receives the audit lines of replays. Defaults to
	// slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.BulkLimit <= 0 {
		c.BulkLimit = 1000
	}
	c.BulkLimit = min(c.BulkLimit, 1000)
	if c.SessionTTL <= 0 {
		c.SessionTTL = 12 * time.Hour
	}
	if c.WrongTokenBurst <= 0 {
		c.WrongTokenBurst = defaultWrongTokenBurst
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Routes == nil {
		c.Routes = jobs.Routes{}
	}
	if c.Sources == nil {
		c.Sources = gateway.Sources{}
	}
	return c
}

// Admin serves the admin API, the event browser and the dashboard; its
// replays (also the CLI's, through the API) are a jobs.Replayer's.
type Admin struct {
	events  eventStore
	replays replayer
	cfg     Config
	auth    *authenticator
	// throttle counts wrong tokens by client address (throttle.go).
	throttle *throttle
	log      *slog.Logger
	pages    map[string]*template.Template
}

// New returns the admin surface on events (*dedupe.Store in production),
// replaying through replays (a *jobs.Replayer).
func New(events eventStore, replays replayer, cfg Config) *Admin {
	cfg = cfg.WithDefaults()
	return &Admin{
		events:   events,
		replays:  replays,
		cfg:      cfg,
		auth:     newAuthenticator(cfg),
		throttle: newThrottle(cfg.WrongTokenBurst, cfg.Now, cfg.Logger),
		log:      cfg.Logger,
		pages:    parsePages(),
	}
}

// held returns the destinations whose calls wait (paused, circuit
// open): the event views show the runs they hold as held.
func (a *Admin) held() []dedupe.HeldDestination {
	if a.cfg.Destinations == nil {
		return nil
	}
	return a.cfg.Destinations.Held()
}

// view is what the configuration in force says of the destinations, for
// shown statuses: those that wait (paused, circuit open) and those
// configured, so a run of a destination a reload removed shows held, not
// queued forever.
func (a *Admin) view() dedupe.DestinationView {
	v := dedupe.DestinationView{Held: a.held()}
	for source, dests := range a.routes() {
		for name := range dests {
			v.Configured = append(v.Configured, dedupe.Route{Source: source, Destination: name})
		}
	}
	return v
}

// eventDetail returns one event's detail, its runs shown as what will
// happen next.
func (a *Admin) eventDetail(ctx context.Context, source, id string) (dedupe.EventDetail, error) {
	return a.events.GetEvent(ctx, source, id, a.view())
}

// Mode returns the admin's access mode: ModeOff, ModeToken or
// ModeUnsafeTokenlessLoopback.
func (a *Admin) Mode() string { return a.auth.mode }

// LogAccess logs, once, how the admin surface is reached: off, with
// tokens (how many of each role), or without a token on loopback (a
// warning). A process calls it where it mounts the admin.
func (a *Admin) LogAccess(ctx context.Context) {
	mode := slog.String("admin_mode", a.auth.mode)
	switch a.auth.mode {
	case ModeOff:
		a.log.InfoContext(ctx, "admin is off: no admin token configured, every /admin route answers 403 "+
			"(set admin_token, admin.tokens or admin.read_only_tokens to turn it on)", mode)
	case ModeUnsafeTokenlessLoopback:
		a.log.WarnContext(ctx, "UNSAFE: admin answers without a token to loopback peers addressing localhost "+
			"(admin.unsafe_tokenless_loopback); anyone on this host, and anyone a local reverse proxy lets in, "+
			"can read payloads and replay events", mode)
	default:
		a.log.InfoContext(ctx, "admin needs a token", mode, slog.String("path", "/admin/"),
			slog.Int("full_tokens", len(a.auth.full)), slog.Int("read_only_tokens", len(a.auth.readOnly)))
	}
}

// Body limits of the admin routes: the login form holds a token and a
// path; the API's JSON, the replay forms and the dashboard's API calls
// hold a few filter values.
const (
	loginBodyLimit = 4 << 10
	adminBodyLimit = 64 << 10
)

// Mount adds the admin routes to e.
func (a *Admin) Mount(e *echo.Echo) {
	e.GET("/admin/login", a.login, gateway.LimitBody(loginBodyLimit), securityHeaders)
	e.POST("/admin/login", a.login, gateway.LimitBody(loginBodyLimit), securityHeaders)
	e.GET("/admin/assets/*", assets(), gateway.LimitBody(0), securityHeaders)
	e.GET("/admin", func(c echo.Context) error { return c.Redirect(http.StatusFound, "/admin/") },
		gateway.LimitBody(adminBodyLimit), securityHeaders, a.middleware)

	g := e.Group("/admin", gateway.LimitBody(adminBodyLimit), securityHeaders, a.middleware)
	g.POST("/logout", a.logout)
	g.GET("/events", a.listEvents)
	g.GET("/events/stream", a.streamEvents)
	g.GET("/events/:source/:id", a.getEvent)
	g.POST("/events/:source/:id/replay", a.replayEvent)
	g.POST("/events/:source/:id/skip", a.skipEvent)
	g.POST("/replay", a.bulkReplayAPI)
	g.POST("/reload", a.reload)
	g.POST("/rules/test", a.rulesTest)
	g.GET("/rejected", a.listRejected)
	g.GET("/entities", a.listEntities)
	g.GET("/view/rejected", a.browseRejected)

	g.GET("/", a.browseList)
	g.GET("/view/:source/:id", a.redirectToEvent)
	g.GET("/view/bulk-replay", a.browseBulk)
	g.POST("/view/bulk-replay", a.browseBulk)
	g.POST("/view/:source/:id/replay", a.browseReplay)
	g.GET("/view", a.browseEvent)
	g.POST("/view/replay", a.browseReplay)

	if a.cfg.Destinations != nil {
		g.GET("/destinations", a.listDestinations)
		g.POST("/destinations/:source/:name/pause", a.steerDestination(true))
		g.POST("/destinations/:source/:name/resume", a.steerDestination(false))
		g.GET("/view/destinations", a.browseDestinations)
		g.GET("/view/destinations/:source/:name", a.browseDestination)
		if a.cfg.TestEvents != nil {
			g.POST("/destinations/:source/:name/test", a.testDestination)
			g.POST("/view/destinations/:source/:name/test", a.browseTestDestination)
		}
		g.POST("/view/destinations/pause", a.browseSteer(true))
		g.POST("/view/destinations/resume", a.browseSteer(false))
	}
	if a.cfg.Issues != nil {
		g.GET("/issues", a.listIssues)
		g.GET("/issues/:id", a.getIssue)
		g.POST("/issues/:id/resolve", a.resolveIssue)
		g.GET("/view/issues", a.browseIssues)
		g.GET("/view/issues/:id", a.browseIssue)
		g.POST("/view/issues/:id/resolve", a.browseResolve)
	}
	if a.cfg.Dashboard != nil {
		g.GET("/queues", func(c echo.Context) error { return c.Redirect(http.StatusFound, "/admin/queues/") })
		full, view := a.cfg.Dashboard, a.cfg.ReadOnlyDashboard
		if view == nil {
			view = full
		}
		g.Any("/queues/*", func(c echo.Context) error {
			if roleOf(c) == roleReadOnly {
				view.ServeHTTP(c.Response(), c.Request())
			} else {
				full.ServeHTTP(c.Response(), c.Request())
			}
			return nil
		})
	}
}

// requestLog returns the logger for an admin request's lines, carrying
// its request id like the gateway's ingest lines.
func (a *Admin) requestLog(c echo.Context) *slog.Logger {
	return a.log.With(gateway.RequestAttrs(c)...)
}

// routes returns the routes in force (a reload swaps them).
func (a *Admin) routes() jobs.Routes { return a.cfg.Routes.Load() }

// gatewaySources returns the sources in force (a reload swaps them).
func (a *Admin) gatewaySources() gateway.Sources { return a.cfg.Sources.Load() }

// sources returns the configured source names, sorted.
func (a *Admin) sources() []string {
	routes := a.routes()
	names := make([]string, 0, len(routes))
	for n := range routes {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// httpError maps the package's errors to an Echo error with a status the
// gateway's error handler renders as JSON.
func httpError(err error) error {
	var he *echo.HTTPError
	switch {
	case errors.As(err, &he):
		return err
	case errors.Is(err, dedupe.ErrNotFound):
		return echo.NewHTTPError(http.StatusNotFound, "event not found")
	case errors.Is(err, jobs.ErrUnknownSource), errors.Is(err, jobs.ErrUnknownDestination), errors.Is(err, errRuleCompile):
		return echo.NewHTTPError(http.StatusUnprocessableEntity, err.Error())
	case errors.Is(err, dedupe.ErrBadCursor), errors.Is(err, ErrBadFilter), errors.Is(err, jobs.ErrBadReplay),
		errors.Is(err, textfield.ErrInvalid):
		return echo.NewHTTPError(http.StatusBadRequest, err.Error())
	case errors.Is(err, jobs.ErrEnqueueFailed):
		return echo.NewHTTPError(http.StatusServiceUnavailable, strings.TrimSpace(err.Error()))
	case errors.Is(err, dedupe.ErrTooSlow):
		return echo.NewHTTPError(http.StatusServiceUnavailable, "the database did not answer in time; try again or narrow the filter")
	}
	return err
}
