package listen

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/webhookd/webhookd/gateway/admin"
	"github.com/webhookd/webhookd/gateway/admin/adminclient"
)

// streamPath is the gateway's event stream.
const streamPath = "/admin/events/stream"

// streamClient asks a gateway's event stream for pages, through the
// operator commands' admin client (its token, its errors).
type streamClient struct {
	admin  *adminclient.Client
	filter url.Values // source, type
	wait   time.Duration
}

func newStreamClient(c *adminclient.Client, source, typ string, wait time.Duration) *streamClient {
	filter := url.Values{}
	if source != "" {
		filter.Set("source", source)
	}
	if typ != "" {
		filter.Set("type", typ)
	}
	return &streamClient{admin: c, filter: filter, wait: wait}
}

// fetch asks for the page at from (after=… or since=…), waiting up to
// the client's wait for events (not at all with noWait), and with count
// the backlog after it. An error that is a refusal for good (refused)
// wraps an *adminclient.APIError.
func (c *streamClient) fetch(ctx context.Context, from url.Values, count, noWait bool) (admin.StreamJSON, error) {
	q := url.Values{}
	for k, v := range c.filter {
		q[k] = v
	}
	for k, v := range from {
		q[k] = v
	}
	wait := c.wait
	if noWait {
		wait = 0
	}
	q.Set("wait", wait.String())
	if count {
		q.Set("count", "1")
	}
	var page admin.StreamJSON
	if _, err := c.admin.Get(ctx, streamPath, q, &page); err != nil {
		var ae *adminclient.APIError
		if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
			return page, fmt.Errorf("%w (a gateway older than webhookd listen has no event stream: upgrade it)", err)
		}
		return page, err
	}
	if page.Next == "" {
		return page, errors.New("the stream's answer has no cursor")
	}
	return page, nil
}

// refused reports whether err is the gateway refusing the stream request
// for good (a 4xx other than 408 and 429: a token it does not take, a
// cursor or filter it cannot use, a gateway without the stream). Other
// failures (no answer, 5xx) are retried.
func refused(err error) bool {
	var ae *adminclient.APIError
	return errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500 &&
		ae.Status != http.StatusRequestTimeout && ae.Status != http.StatusTooManyRequests
}
