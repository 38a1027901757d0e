package admin

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/dedupe"
)

// Bounds of a page of rejected requests.
const (
	defaultRejectedLimit = 50
	maxRejectedLimit     = 500
)

// RejectedJSON is one rejected request as GET /admin/rejected shows it:
// its headers without credentials and with signatures masked, its body's
// first 4 KiB as text.
type RejectedJSON struct {
	ID        int64           `json:"id"`
	At        time.Time       `json:"at"`
	Source    string          `json:"source"`
	Remote    string          `json:"remote"`
	Status    int             `json:"status"`
	Reason    string          `json:"reason"`
	Headers   json.RawMessage `json:"headers,omitempty"`
	Body      string          `json:"body"`
	BodyBytes int             `json:"body_bytes"`
}

// RejectedListJSON is a page of rejected requests, newest first; Next
// is the before= of the next (older) page, empty at the end.
type RejectedListJSON struct {
	Rejected []RejectedJSON `json:"rejected"`
	Next     string         `json:"next,omitempty"`
}

func toRejectedJSON(r dedupe.Rejected) RejectedJSON {
	return RejectedJSON{
		ID: r.ID, At: r.At, Source: r.Source, Remote: r.Remote, Status: r.Status, Reason: r.Reason,
		Headers: r.Headers, Body: strings.ToValidUTF8(string(r.Body), "\ufffd"), BodyBytes: r.BodyBytes,
	}
}

// rejectedPage reads GET /admin/rejected's query: source, before, limit.
func (a *Admin) rejectedPage(c echo.Context) (RejectedListJSON, error) {
	source := c.QueryParam("source")
	if err := checkText(textInput{"source", source, maxNameBytes}); err != nil {
		return RejectedListJSON{}, err
	}
	var before int64
	if v := c.QueryParam("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return RejectedListJSON{}, echo.NewHTTPError(http.StatusBadRequest, "before: want a record's id")
		}
		before = n
	}
	limit := defaultRejectedLimit
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return RejectedListJSON{}, echo.NewHTTPError(http.StatusBadRequest, "limit: want a positive number")
		}
		limit = min(n, maxRejectedLimit)
	}
	rows, err := a.events.ListRejected(c.Request().Context(), source, before, limit)
	if err != nil {
		return RejectedListJSON{}, err
	}
	out := RejectedListJSON{Rejected: []RejectedJSON{}}
	for _, r := range rows {
		out.Rejected = append(out.Rejected, toRejectedJSON(r))
	}
	if len(rows) == limit {
		out.Next = strconv.FormatInt(rows[len(rows)-1].ID, 10)
	}
	return out, nil
}

// listRejected handles GET /admin/rejected.
func (a *Admin) listRejected(c echo.Context) error {
	out, err := a.rejectedPage(c)
	if err != nil {
		return httpError(err)
	}
	return c.JSON(http.StatusOK, out)
}

// rejectedView is the page of rejected requests.
type rejectedView struct {
	viewer
	RejectedListJSON
	Source string
}

// browseRejected handles GET /admin/view/rejected.
func (a *Admin) browseRejected(c echo.Context) error {
	out, err := a.rejectedPage(c)
	if err != nil {
		return httpError(err)
	}
	return a.render(c, http.StatusOK, "rejected", &rejectedView{RejectedListJSON: out, Source: c.QueryParam("source")})
}
