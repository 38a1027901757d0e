package admin

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
)

// pageCSP is the Content-Security-Policy of every admin answer, the
// queue dashboard's included: the pages load their stylesheets, scripts
// and fonts from this server and nothing else, fetch only from it (the
// live pages, the dashboard's API), post their forms to it only, run no
// inline script or style, and may not be framed.
const pageCSP = "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; font-src 'self'; " +
	"connect-src 'self'; manifest-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// styleNonceCSP is pageCSP that also admits <style> elements carrying
// nonce: the queue dashboard's, whose components write their styles at
// run time (dashboard).
func styleNonceCSP(nonce string) string {
	return strings.Replace(pageCSP, "style-src 'self'", "style-src 'self' 'nonce-"+nonce+"'", 1)
}

// securityHeaders sets what every admin answer carries: not cached, not
// framed (X-Frame-Options and the CSP's frame-ancestors, against
// clickjacking a Replay button), not sniffed, and the CSP.
func securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Cache-Control", "no-store")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", pageCSP)
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
