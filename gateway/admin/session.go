package admin

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

// sessionCookie is the cookie the login page sets for browsers. Its value
// is "<expiry unix seconds>.<role>.<HMAC of both keyed by the token that
// signed in>", role being "full" or "read": it holds no secret, and its
// holder can neither extend it nor raise its role. It is valid while a
// token of its role still verifies it, so removing a token from the
// config (or moving it to the other list) ends the sessions it opened.
const sessionCookie = "webhookd_admin"

// sessionMAC returns the MAC part of a session of role expiring at exp,
// keyed by token.
func sessionMAC(token, role, exp string) []byte {
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write([]byte("webhookd admin session v3\n" + role + "\n" + exp))
	return mac.Sum(nil)
}

// newSession returns a session cookie of rl, signed with token (the
// configured token of that role the browser signed in with), valid for
// a.sessionTTL from now; secure marks it Secure (the request came over
// TLS).
func (a *authenticator) newSession(token string, rl role, secure bool) *http.Cookie {
	exp := strconv.FormatInt(a.now().Add(a.sessionTTL).Unix(), 10)
	return &http.Cookie{
		Name:     sessionCookie,
		Value:    exp + "." + rl.sessionRole() + "." + hex.EncodeToString(sessionMAC(token, rl.sessionRole(), exp)),
		Path:     "/admin",
		MaxAge:   int(a.sessionTTL / time.Second),
		HttpOnly: true,
		Secure:   secure,
		SameSite: http.SameSiteStrictMode,
	}
}

// secureCookie says whether the session cookie of r is marked Secure: it
// came over TLS, or the configuration says a TLS proxy serves webhookd.
func (a *Admin) secureCookie(r *http.Request) bool {
	return r.TLS != nil || a.cfg.SecureCookie
}

// cookie returns the role of r's session cookie, roleNone when there is
// none, it expired, or no configured token of its role verifies it. Every
// token of the role is tried, without stopping at a match.
func (a *authenticator) cookie(r *http.Request) role {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return roleNone
	}
	exp, rest, _ := strings.Cut(c.Value, ".")
	name, macHex, _ := strings.Cut(rest, ".")
	unix, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || a.now().Unix() >= unix {
		return roleNone
	}
	mac, err := hex.DecodeString(macHex)
	if err != nil || len(mac) != sha256.Size {
		return roleNone
	}
	var (
		rl     role
		tokens []string
	)
	switch name {
	case roleFull.sessionRole():
		rl, tokens = roleFull, a.full
	case roleReadOnly.sessionRole():
		rl, tokens = roleReadOnly, a.readOnly
	default:
		return roleNone
	}
	ok := 0
	for _, t := range tokens {
		ok |= subtle.ConstantTimeCompare(mac, sessionMAC(t, name, exp))
	}
	if ok != 1 {
		return roleNone
	}
	return rl
}

// logout handles POST /admin/logout (behind the admin check, so refused
// cross-origin like every admin POST; a read-only session may use it):
// it clears the session cookie and sends the browser to the login page.
// A copy of the cookie taken before stays valid until it expires;
// removing the token that opened it ends it.
func (a *Admin) logout(c echo.Context) error {
	c.SetCookie(&http.Cookie{
		Name:     sessionCookie,
		Path:     "/admin",
		MaxAge:   -1,
		HttpOnly: true,
		Secure:   a.secureCookie(c.Request()),
		SameSite: http.SameSiteStrictMode,
	})
	a.requestLog(c).InfoContext(c.Request().Context(), "admin signed out", "remote", c.Request().RemoteAddr)
	return c.Redirect(http.StatusSeeOther, "/admin/login")
}
