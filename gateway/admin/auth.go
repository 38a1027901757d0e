package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

// authenticator decides whether a request may use the admin surface.
type authenticator struct {
	token      string
	sessionTTL time.Duration
	now        func() time.Time
	cop        *http.CrossOriginProtection
	hosts      []string // names Host may carry without a token, besides loopback ones
}

func newAuthenticator(cfg Config) *authenticator {
	return &authenticator{
		token: cfg.Token, sessionTTL: cfg.SessionTTL, now: cfg.Now,
		cop: http.NewCrossOriginProtection(), hosts: cfg.Hosts,
	}
}

// equal compares in constant time; hashing first hides the length too.
func equal(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// bearer reports whether r carries the token.
func (a *authenticator) bearer(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return equal(strings.TrimSpace(tok), a.token)
}

// isLoopback reports whether the TCP peer is on this host. It reads the
// connection's address, never X-Forwarded-For, which a client can set.
func isLoopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// localName reports whether host (a Host header or an Origin's host,
// with or without a port) names this server for a tokenless admin: a
// loopback address, "localhost", or one of the configured names. A page
// that DNS rebinding brought to the loopback interface carries its own
// name, so it is refused.
func (a *authenticator) localName(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	return host == "localhost" || slices.Contains(a.hosts, host)
}

// localOrigin reports whether an Origin header is absent or names this
// server (see localName).
func (a *authenticator) localOrigin(origin string) bool {
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && a.localName(u.Host)
}

// allowed reports whether r may use the admin surface, and if not, the
// status and message to answer.
func (a *authenticator) allowed(r *http.Request) (bool, int, string) {
	if a.token == "" {
		if !isLoopback(r) {
			return false, http.StatusForbidden, "admin answers only on loopback when no admin_token is configured"
		}
		if !a.localName(r.Host) || !a.localOrigin(r.Header.Get("Origin")) {
			return false, http.StatusForbidden, "admin without an admin_token answers only requests addressed to localhost (Host and Origin)"
		}
	} else if !a.bearer(r) && !a.cookie(r) {
		return false, http.StatusUnauthorized, "missing or wrong admin token"
	}
	if err := a.cop.Check(r); err != nil {
		return false, http.StatusForbidden, "cross-origin request refused"
	}
	return true, 0, ""
}

// middleware guards every admin route.
func (a *Admin) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		ok, code, msg := a.auth.allowed(c.Request())
		if ok {
			return next(c)
		}
		if code == http.StatusUnauthorized {
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="webhookd admin"`)
			if wantsHTML(c.Request()) && c.Request().Method == http.MethodGet {
				return a.render(c, code, "login", loginPage{Next: c.Request().URL.RequestURI(), Message: ""})
			}
		}
		a.requestLog(c).WarnContext(c.Request().Context(), "admin request refused",
			"status_code", code, "path", c.Request().URL.Path, "remote", c.Request().RemoteAddr)
		return echo.NewHTTPError(code, msg)
	}
}

// wantsHTML reports whether the client is a browser asking for a page.
func wantsHTML(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// login handles GET and POST /admin/login: the form takes the token and
// sets the session cookie, so browsers (and the dashboard's own API
// calls) are authenticated without a header. It is the one admin route
// that answers before authentication, so it reads only what the form
// sends: an urlencoded body of at most loginBodyLimit bytes (415 for any
// other type, 413 past the limit), never a multipart one.
func (a *Admin) login(c echo.Context) error {
	r := c.Request()
	next := c.QueryParam("next")
	if r.Method == http.MethodPost {
		if err := parseForm(r); err != nil {
			return err
		}
		next = r.PostForm.Get("next")
	}
	if !strings.HasPrefix(next, "/admin/") {
		next = "/admin/"
	}
	if a.auth.token == "" {
		return c.Redirect(http.StatusSeeOther, next)
	}
	if r.Method == http.MethodGet {
		return a.render(c, http.StatusOK, "login", loginPage{Next: next})
	}
	if err := a.auth.cop.Check(r); err != nil {
		return echo.NewHTTPError(http.StatusForbidden, "cross-origin request refused")
	}
	if !equal(r.PostForm.Get("token"), a.auth.token) {
		a.requestLog(c).WarnContext(r.Context(), "admin login refused", "remote", r.RemoteAddr)
		return a.render(c, http.StatusUnauthorized, "login", loginPage{Next: next, Message: "Wrong token."})
	}
	c.SetCookie(a.auth.newSession(r.TLS != nil))
	return c.Redirect(http.StatusSeeOther, next)
}

// parseForm parses a page form's urlencoded body into r.PostForm: 415
// for another content type (a multipart body is never parsed, so never
// spooled to disk), 413 past the route's body limit, 400 for a body that
// does not parse.
func parseForm(r *http.Request) error {
	mt, _, err := mime.ParseMediaType(r.Header.Get(echo.HeaderContentType))
	if err != nil || mt != echo.MIMEApplicationForm {
		return echo.NewHTTPError(http.StatusUnsupportedMediaType, "the form must be sent as application/x-www-form-urlencoded")
	}
	if err := r.ParseForm(); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return err
		}
		return echo.NewHTTPError(http.StatusBadRequest, "the form does not parse")
	}
	return nil
}
