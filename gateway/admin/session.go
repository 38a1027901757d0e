package admin

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

// sessionCookie is the cookie the login page sets for browsers. Its value
// is "<expiry unix seconds>.<HMAC of the expiry keyed by the token>": it
// holds no secret, cannot be extended by its holder, and every session
// ends when the token changes.
const sessionCookie = "webhookd_admin"

// sessionMAC returns the MAC part of a session value expiring at exp.
func (a *authenticator) sessionMAC(exp string) string {
	mac := hmac.New(sha256.New, []byte(a.token))
	mac.Write([]byte("webhookd admin session v2\n" + exp))
	return hex.EncodeToString(mac.Sum(nil))
}

// newSession returns a session cookie valid for a.sessionTTL from now.
func (a *authenticator) newSession(secure bool) *http.Cookie {
	exp := strconv.FormatInt(a.now().Add(a.sessionTTL).Unix(), 10)
	return &http.Cookie{
		Name:     sessionCookie,
		Value:    exp + "." + a.sessionMAC(exp),
		Path:     "/admin",
		MaxAge:   int(a.sessionTTL / time.Second),
		HttpOnly: true,
		Secure:   secure,
		SameSite: http.SameSiteStrictMode,
	}
}

// cookie reports whether r carries a session cookie that has not expired.
func (a *authenticator) cookie(r *http.Request) bool {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return false
	}
	exp, mac, ok := strings.Cut(c.Value, ".")
	if !ok {
		return false
	}
	unix, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || a.now().Unix() >= unix {
		return false
	}
	return equal(mac, a.sessionMAC(exp))
}

// logout handles POST /admin/logout (behind the admin check, so refused
// cross-origin like every admin POST): it clears the session cookie and
// sends the browser to the login page. A copy of the cookie taken before
// stays valid until it expires; changing the token ends every session.
func (a *Admin) logout(c echo.Context) error {
	c.SetCookie(&http.Cookie{
		Name:     sessionCookie,
		Path:     "/admin",
		MaxAge:   -1,
		HttpOnly: true,
		Secure:   c.Request().TLS != nil,
		SameSite: http.SameSiteStrictMode,
	})
	a.requestLog(c).InfoContext(c.Request().Context(), "admin signed out", "remote", c.Request().RemoteAddr)
	return c.Redirect(http.StatusSeeOther, "/admin/login")
}
