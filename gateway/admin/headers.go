package admin

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
)

// pageCSP is the Content-Security-Policy of webhookd's own admin answers:
// the pages load their stylesheet and script from /admin/assets/ and
// nothing else, post their forms to this server only, and may not be
// framed.
const pageCSP = "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// dashboardCSP is the Asynq dashboard's: it needs its inline scripts and
// web fonts, so only framing is forbidden.
const dashboardCSP = "frame-ancestors 'none'"

// securityHeaders sets what every admin answer carries: not cached, not
// framed (X-Frame-Options and the CSP's frame-ancestors, against
// clickjacking a Replay button), not sniffed, and the CSP for its kind of
// page.
func securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Cache-Control", "no-store")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		csp := pageCSP
		if strings.HasPrefix(c.Request().URL.Path, DashboardPath+"/") {
			csp = dashboardCSP
		}
		h.Set("Content-Security-Policy", csp)
		return next(c)
	}
}

//go:embed assets
var assetFS embed.FS

// assets serves the pages' stylesheet and script at /admin/assets/,
// without authentication (the login page uses them; they hold nothing
// secret). Files only: a directory is not found, never listed.
func assets() echo.HandlerFunc {
	sub, err := fs.Sub(assetFS, "assets")
	if err != nil {
		panic(err) // the embedded directory exists at build time
	}
	return echo.WrapHandler(http.StripPrefix("/admin/assets/", http.FileServerFS(filesOnly{sub})))
}

// filesOnly is a file system whose directories do not exist.
type filesOnly struct{ fs.FS }

func (f filesOnly) Open(name string) (fs.File, error) {
	file, err := f.FS.Open(name)
	if err != nil {
		return nil, err
	}
	if st, err := file.Stat(); err != nil || st.IsDir() {
		_ = file.Close()
		return nil, fs.ErrNotExist
	}
	return file, nil
}
