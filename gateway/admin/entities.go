package admin

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
)

// Bounds of a list of held entities.
const (
	defaultEntitiesLimit = 100
	maxEntitiesLimit     = 1000
)

// HeldEntityJSON is an entity whose events wait on a destination behind
// an earlier event that is not settled (order mode fifo), as GET
// /admin/entities?state=held shows it.
type HeldEntityJSON struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
	Entity      string `json:"entity"`
	// Behind is the event the entity waits behind, BehindStatus its
	// run's status (a dead or failed one waits for a replay or a skip).
	Behind       string `json:"behind"`
	BehindStatus string `json:"behind_status,omitempty"`
	// Waiting counts the entity's events held behind it; Since is when
	// the oldest of them began to wait.
	Waiting int       `json:"waiting"`
	Since   time.Time `json:"since"`
}

// HeldEntitiesJSON is GET /admin/entities's answer, oldest wait first.
type HeldEntitiesJSON struct {
	Entities []HeldEntityJSON `json:"entities"`
}

// heldEntities reads GET /admin/entities's query (state=held, the only
// state and the default; source; destination; limit) and lists them.
func (a *Admin) heldEntities(c echo.Context) (HeldEntitiesJSON, error) {
	if st := c.QueryParam("state"); st != "" && st != "held" {
		return HeldEntitiesJSON{}, echo.NewHTTPError(http.StatusBadRequest, "state: only held is listed")
	}
	source, destination := c.QueryParam("source"), c.QueryParam("destination")
	if err := checkText(textInput{"source", source, maxNameBytes}, textInput{"destination", destination, maxNameBytes}); err != nil {
		return HeldEntitiesJSON{}, err
	}
	limit := defaultEntitiesLimit
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return HeldEntitiesJSON{}, echo.NewHTTPError(http.StatusBadRequest, "limit: want a positive number")
		}
		limit = min(n, maxEntitiesLimit)
	}
	rows, err := a.events.HeldEntities(c.Request().Context(), source, destination, limit)
	if err != nil {
		return HeldEntitiesJSON{}, err
	}
	out := HeldEntitiesJSON{Entities: []HeldEntityJSON{}}
	for _, h := range rows {
		out.Entities = append(out.Entities, HeldEntityJSON{Source: h.Source, Destination: h.Destination, Entity: h.Entity,
			Behind: h.Behind, BehindStatus: h.BehindStatus, Waiting: h.Waiting, Since: h.Since})
	}
	return out, nil
}

// listEntities handles GET /admin/entities.
func (a *Admin) listEntities(c echo.Context) error {
	out, err := a.heldEntities(c)
	if err != nil {
		return httpError(err)
	}
	return c.JSON(http.StatusOK, out)
}
