package admin

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"
)

// ErrReloadUnavailable is returned by a Reloader of a process started
// without a configuration file to read again (409).
var ErrReloadUnavailable = errors.New("this process was started without a configuration file to read again")

// ErrConfigInvalid wraps the problems of a configuration a reload refused:
// nothing changed (422).
var ErrConfigInvalid = errors.New("the configuration has problems; nothing changed")

// Reloader reads the configuration again and puts it in force (SPEC:
// "Configuration reloads without a restart").
type Reloader func(ctx context.Context) (ReloadResult, error)

// ReloadResult says what a reload put in force.
type ReloadResult struct {
	// Sources and Destinations count what is configured now.
	Sources      int `json:"sources"`
	Destinations int `json:"destinations"`
	// Added, Removed and Changed name sources and destinations
	// ("stripe", "stripe/billing") the reload added, removed or changed.
	Added   []string `json:"added"`
	Removed []string `json:"removed"`
	Changed []string `json:"changed"`
	// NeedRestart names the keys that differ in the file but cannot
	// change in a running process (listen, database_url, redis, ...):
	// they keep their old values until a restart.
	NeedRestart []string `json:"need_restart"`
}

// reload answers POST /admin/reload: 200 with what changed, 422 with
// every problem of an invalid file (nothing changed), 409 when the
// process cannot reload.
func (a *Admin) reload(c echo.Context) error {
	if a.cfg.Reload == nil {
		return echo.NewHTTPError(http.StatusConflict, ErrReloadUnavailable.Error())
	}
	res, err := a.cfg.Reload(c.Request().Context())
	switch {
	case errors.Is(err, ErrReloadUnavailable):
		return echo.NewHTTPError(http.StatusConflict, err.Error())
	case errors.Is(err, ErrConfigInvalid):
		return echo.NewHTTPError(http.StatusUnprocessableEntity, err.Error())
	case err != nil:
		return err
	}
	return c.JSON(http.StatusOK, res)
}
