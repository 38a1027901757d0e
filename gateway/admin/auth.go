package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/gateway"
)

// Access modes of the admin surface, as Admin.Mode reports them and the
// start-up log names them.
const (
	// ModeOff: no token is configured, so every admin route but the
	// static assets answers 403 saying how to turn admin on.
	ModeOff = "off"
	// ModeToken: a request needs one of the configured tokens (bearer
	// header or the session cookie the login page sets).
	ModeToken = "token"
	// ModeUnsafeTokenlessLoopback: the operator opted in to admin without
	// a token for loopback peers whose Host and Origin name this server.
	// Behind a reverse proxy on the same host every request is a loopback
	// peer, hence the name.
	ModeUnsafeTokenlessLoopback = "unsafe_tokenless_loopback"
)

// MinTokenBytes is the shortest admin token CheckToken accepts.
const MinTokenBytes = 16

// CheckToken returns nil for a usable admin token: at least
// MinTokenBytes bytes, without control characters or spaces at either end
// (a bearer header drops those), else an error saying what is wrong with
// it (never the token itself).
func CheckToken(tok string) error {
	if tok == "" {
		return errors.New("is empty (an unset ${VAR}?)")
	}
	if strings.TrimSpace(tok) != tok {
		return errors.New("starts or ends with white space, which a bearer header drops")
	}
	if strings.ContainsFunc(tok, unicode.IsControl) {
		return errors.New("holds a control character, which a header cannot carry")
	}
	if len(tok) < MinTokenBytes {
		return fmt.Errorf("is %d bytes, shorter than %d: use a long random value (e.g. openssl rand -hex 32)", len(tok), MinTokenBytes)
	}
	return nil
}

// role is what an admin request may do.
type role int

const (
	roleNone role = iota
	// roleReadOnly may read everything but change nothing: no replay, no
	// pause or resume, no dashboard action.
	roleReadOnly
	roleFull
)

// sessionRole names a role in the session cookie.
func (r role) sessionRole() string {
	if r == roleReadOnly {
		return "read"
	}
	return "full"
}

// roleKey is where the middleware leaves the request's role in the Echo
// context, for the pages to hide what it may not do.
const roleKey = "webhookd_admin_role"

// authenticator decides whether a request may use the admin surface, and
// with which role.
type authenticator struct {
	mode string
	// full and readOnly are the tokens of each role; fullHashes and
	// readOnlyHashes their SHA-256, compared with the presented token's.
	full, readOnly             []string
	fullHashes, readOnlyHashes [][sha256.Size]byte
	sessionTTL                 time.Duration
	now                        func() time.Time
	cop                        *http.CrossOriginProtection
	hosts                      []string // names Host may carry without a token, besides loopback ones
}

func newAuthenticator(cfg Config) *authenticator {
	a := &authenticator{sessionTTL: cfg.SessionTTL, now: cfg.Now, cop: http.NewCrossOriginProtection(), hosts: cfg.Hosts}
	// An empty token would match an empty bearer; the config refuses
	// one, and here it is never a token.
	for _, t := range cfg.Tokens {
		if t != "" {
			a.full = append(a.full, t)
			a.fullHashes = append(a.fullHashes, sha256.Sum256([]byte(t)))
		}
	}
	for _, t := range cfg.ReadOnlyTokens {
		if t != "" {
			a.readOnly = append(a.readOnly, t)
			a.readOnlyHashes = append(a.readOnlyHashes, sha256.Sum256([]byte(t)))
		}
	}
	switch {
	case len(a.full)+len(a.readOnly) > 0:
		a.mode = ModeToken
	case cfg.UnsafeTokenlessLoopback:
		a.mode = ModeUnsafeTokenlessLoopback
	default:
		a.mode = ModeOff
	}
	return a
}

// match returns the role of a presented token. It compares the token's
// hash (which hides its length) with every configured token's in
// constant time and never stops early, so the time taken says nothing
// about which token, if any, matched.
func (a *authenticator) match(tok string) role {
	if tok == "" {
		return roleNone
	}
	h := sha256.Sum256([]byte(tok))
	full, ro := 0, 0
	for i := range a.fullHashes {
		full |= subtle.ConstantTimeCompare(h[:], a.fullHashes[i][:])
	}
	for i := range a.readOnlyHashes {
		ro |= subtle.ConstantTimeCompare(h[:], a.readOnlyHashes[i][:])
	}
	switch {
	case full == 1:
		return roleFull
	case ro == 1:
		return roleReadOnly
	}
	return roleNone
}

// bearer returns the role of the token r's Authorization header carries.
func (a *authenticator) bearer(r *http.Request) role {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return roleNone
	}
	return a.match(strings.TrimSpace(tok))
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

// Why admin refuses a request, as the answer says it.
const (
	msgAdminOff = "admin is off: no admin token is configured. Turn it on with admin_token " +
		"(or WEBHOOKD_ADMIN_TOKEN), admin.tokens or admin.read_only_tokens in the config (see SECURITY.md)"
	msgReadOnly = "read-only admin token: replays, pauses, resumes and queue actions need a full admin token " +
		"(admin_token or admin.tokens)"
)

// refusal is why a request may not use the admin surface: the status and
// message to answer.
type refusal struct {
	code int
	msg  string
}

// allowed returns the role r may use the admin surface with, or why not.
// A read-only role is returned for any method; the middleware refuses it
// what it may not change.
func (a *authenticator) allowed(r *http.Request) (role, *refusal) {
	var rl role
	switch a.mode {
	case ModeOff:
		// 403, not 404: the route exists and a client (the CLI, a
		// script) must be able to tell "admin is off" from "no such
		// event", which is a 404.
		return roleNone, &refusal{http.StatusForbidden, msgAdminOff}
	case ModeUnsafeTokenlessLoopback:
		if !isLoopback(r) {
			return roleNone, &refusal{http.StatusForbidden, "admin without a token (admin.unsafe_tokenless_loopback) answers only on loopback"}
		}
		if !a.localName(r.Host) || !a.localOrigin(r.Header.Get("Origin")) {
			return roleNone, &refusal{http.StatusForbidden, "admin without a token (admin.unsafe_tokenless_loopback) answers only requests addressed to localhost (Host and Origin)"}
		}
		rl = roleFull
	default:
		if rl = a.bearer(r); rl == roleNone {
			rl = a.cookie(r)
		}
		if rl == roleNone {
			return roleNone, &refusal{http.StatusUnauthorized, "missing or wrong admin token"}
		}
	}
	if err := a.cop.Check(r); err != nil {
		return roleNone, &refusal{http.StatusForbidden, "cross-origin request refused"}
	}
	return rl, nil
}

// readOnlyMay reports whether a read-only role may make request r: read
// (GET, HEAD) anything, and sign out.
func readOnlyMay(r *http.Request) bool {
	return r.Method == http.MethodGet || r.Method == http.MethodHead || r.URL.Path == "/admin/logout"
}

// middleware guards every admin route: it answers a refused request
// (the login page for a browser without a session, a page saying why for
// another browser request, JSON otherwise) and records the role of an
// allowed one.
func (a *Admin) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		counted := a.auth.mode == ModeToken && presentsToken(r)
		key := clientKey(r)
		if counted {
			if wait := a.throttle.wait(key); wait > 0 {
				a.throttle.refuse(r.Context(), key, refusedThrottled, http.StatusTooManyRequests, gateway.RequestAttrs(c))
				return a.tooMany(c, wait)
			}
		}
		rl, no := a.auth.allowed(r)
		if no == nil && rl == roleReadOnly && !readOnlyMay(r) {
			no = &refusal{http.StatusForbidden, msgReadOnly}
		}
		if no == nil {
			c.Set(roleKey, rl)
			return next(c)
		}
		switch {
		case no.code == http.StatusUnauthorized && counted:
			a.throttle.refuse(r.Context(), key, refusedWrongToken, no.code, gateway.RequestAttrs(c)) // logs once a minute
		case no.code == http.StatusUnauthorized:
			a.throttle.refuse(r.Context(), key, refusedNoToken, no.code, gateway.RequestAttrs(c))
		default:
			a.requestLog(c).WarnContext(r.Context(), "admin request refused",
				"status_code", no.code, "path", r.URL.Path, "remote", r.RemoteAddr, "admin_mode", a.auth.mode)
		}
		if no.code == http.StatusUnauthorized {
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="webhookd admin"`)
			if wantsHTML(r) && r.Method == http.MethodGet {
				return a.render(c, no.code, "login", &loginPage{Next: r.URL.RequestURI()})
			}
		}
		if wantsHTML(r) {
			return a.render(c, no.code, "refused", &refusedPage{Off: a.auth.mode == ModeOff, Message: no.msg})
		}
		return echo.NewHTTPError(no.code, no.msg)
	}
}

// roleOf returns the role the middleware found for c's request.
func roleOf(c echo.Context) role {
	rl, _ := c.Get(roleKey).(role)
	return rl
}

// wantsHTML reports whether the client is a browser asking for a page.
func wantsHTML(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// login handles GET and POST /admin/login: the form takes a token and
// sets the session cookie, carrying the token's role, so browsers (and
// the dashboard's own API calls) are authenticated without a header. It
// is the one admin route that answers before authentication, so it reads
// only what the form sends: an urlencoded body of at most loginBodyLimit
// bytes (415 for any other type, 413 past the limit), never a multipart
// one. With admin off it answers 403 like every admin route.
func (a *Admin) login(c echo.Context) error {
	r := c.Request()
	if a.auth.mode == ModeOff {
		if wantsHTML(r) {
			return a.render(c, http.StatusForbidden, "refused", &refusedPage{Off: true, Message: msgAdminOff})
		}
		return echo.NewHTTPError(http.StatusForbidden, msgAdminOff)
	}
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
	if a.auth.mode == ModeUnsafeTokenlessLoopback {
		return c.Redirect(http.StatusSeeOther, next)
	}
	if r.Method == http.MethodGet {
		return a.render(c, http.StatusOK, "login", &loginPage{Next: next})
	}
	if err := a.auth.cop.Check(r); err != nil {
		return echo.NewHTTPError(http.StatusForbidden, "cross-origin request refused")
	}
	key := clientKey(r)
	if wait := a.throttle.wait(key); wait > 0 {
		a.throttle.refuse(r.Context(), key, refusedThrottled, http.StatusTooManyRequests, gateway.RequestAttrs(c))
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(wait/time.Second)))
		return a.render(c, http.StatusTooManyRequests, "login", &loginPage{Next: next, Message: "Too many wrong tokens from your address: try again later."})
	}
	tok := r.PostForm.Get("token")
	rl := a.auth.match(tok)
	if rl == roleNone {
		a.throttle.refuse(r.Context(), key, refusedWrongToken, http.StatusUnauthorized, gateway.RequestAttrs(c)) // logs once a minute
		return a.render(c, http.StatusUnauthorized, "login", &loginPage{Next: next, Message: "Wrong token."})
	}
	a.requestLog(c).InfoContext(r.Context(), "admin signed in", "remote", r.RemoteAddr, slog.Bool("read_only", rl == roleReadOnly))
	c.SetCookie(a.auth.newSession(tok, rl, a.secureCookie(r)))
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
