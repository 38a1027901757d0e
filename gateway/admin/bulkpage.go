package admin

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/jobs"
)

// bulkPreviewSample is how many of the matching events the bulk replay
// page shows before the operator confirms.
const bulkPreviewSample = 20

// bulkPage previews a bulk replay (the dry run's count and a sample) and,
// after the operator confirms with a reason, says what it did.
type bulkPage struct {
	viewer
	// Filter is what selects the events; Hidden carries it (and the
	// cursor) through the form.
	Filter filterInput
	Hidden url.Values
	// ListURL is the event list with the same filter.
	ListURL string
	// Preview is the dry run: the count and the first events.
	Preview jobs.BulkResult
	Matched string
	// Limit is how many events one confirmation replays.
	Limit int
	// Done is what the confirmed replay did, when it ran.
	Done  *jobs.BulkResult
	Error string
}

// browseBulk handles GET /admin/view/bulk-replay (the preview of the
// filter in the query) and POST (the form's confirmation: replay at most
// Limit events, newest first, recording by and reason, then show what
// was done and offer the next batch).
func (a *Admin) browseBulk(c echo.Context) error {
	r := c.Request()
	values := c.QueryParams()
	if r.Method == http.MethodPost {
		if err := parseForm(r); err != nil {
			return err
		}
		values = r.PostForm
	}
	in := filterInputFrom(values)
	data := bulkPage{Filter: in, Hidden: in.values(), Limit: min(defaultBulkLimit, a.cfg.BulkLimit)}
	data.ListURL = "/admin/events"
	if len(data.Hidden) > 0 {
		data.ListURL += "?" + data.Hidden.Encode()
	}
	ctx := r.Context()
	log := a.requestLog(c)
	code := http.StatusOK
	if r.Method == http.MethodPost {
		reason := strings.TrimSpace(values.Get("reason"))
		if reason == "" {
			data.Error = "Say why (the reason is recorded on every run replayed)."
			code = http.StatusBadRequest
		} else {
			res, err := a.bulkReplayWith(ctx, log, bulkRequest{
				filter: in, cursor: values.Get("cursor"), limit: data.Limit,
				by: strings.TrimSpace(values.Get("by")), reason: reason,
			})
			if err != nil {
				he, ok := httpError(err).(*echo.HTTPError)
				if !ok {
					return err
				}
				data.Error, code = errorText(he), he.Code
			} else {
				data.Done = &res
				if res.Next != "" {
					data.Hidden.Set("cursor", res.Next)
				}
			}
		}
	}
	preview, err := a.bulkReplayWith(ctx, log, bulkRequest{filter: in, limit: bulkPreviewSample, dryRun: true})
	if err != nil {
		he, ok := httpError(err).(*echo.HTTPError)
		if !ok {
			return err
		}
		data.Error, code = errorText(he), he.Code
	}
	data.Preview = preview
	data.Matched = countText(eventCount(preview))
	return a.render(c, code, "bulk", &data)
}
