package listen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/webhookd/webhookd/gateway/admin"
)

// StatusError is the gateway refusing a stream request for good (a 4xx
// other than 408 and 429): a token it does not take, a cursor or filter
// it cannot use, a gateway without the stream. Run stops with it; other
// failures (no answer, 5xx) are retried.
type StatusError struct {
	// Status is the answer's status code.
	Status int
	// Msg is the gateway's error message.
	Msg string
}

func (e *StatusError) Error() string {
	switch e.Status {
	case http.StatusUnauthorized:
		return "the gateway refused the admin token (401: " + e.Msg + "): set WEBHOOKD_ADMIN_TOKEN to an admin token of it (a read-only one is enough)"
	case http.StatusNotFound:
		return "the gateway has no event stream (404): it is older than webhookd listen; upgrade it"
	}
	return fmt.Sprintf("the gateway refused the stream request (%d %s): %s", e.Status, http.StatusText(e.Status), e.Msg)
}

// streamClient asks a gateway's event stream for pages.
type streamClient struct {
	endpoint *url.URL
	token    string
	http     *http.Client
	filter   url.Values // source, type
	wait     time.Duration
}

func newStreamClient(server *url.URL, token string, source, typ string, wait time.Duration) *streamClient {
	endpoint := *server
	endpoint.Path = strings.TrimSuffix(endpoint.Path, "/") + "/admin/events/stream"
	endpoint.RawQuery, endpoint.Fragment = "", ""
	filter := url.Values{}
	if source != "" {
		filter.Set("source", source)
	}
	if typ != "" {
		filter.Set("type", typ)
	}
	return &streamClient{
		endpoint: &endpoint, token: token, filter: filter, wait: wait,
		// The gateway answers within wait plus a read of the feed; past
		// twice that plus 10s the connection is taken as dead.
		http: &http.Client{Timeout: 2*wait + 10*time.Second},
	}
}

// fetch asks for the page at from (after=… or since=…), waiting up to
// the client's wait for events (not at all with noWait), and with count
// the backlog after it.
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
	u := *c.endpoint
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return admin.StreamJSON{}, err
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return admin.StreamJSON{}, describeCallError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		var e struct {
			Error   string `json:"error"`
			Message string `json:"message"`
		}
		msg := strings.TrimSpace(string(raw))
		if json.Unmarshal(raw, &e) == nil && e.Error+e.Message != "" {
			msg = e.Error + e.Message
		}
		if resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusRequestTimeout && resp.StatusCode != http.StatusTooManyRequests {
			return admin.StreamJSON{}, &StatusError{Status: resp.StatusCode, Msg: msg}
		}
		return admin.StreamJSON{}, fmt.Errorf("HTTP %d: %s", resp.StatusCode, msg)
	}
	var page admin.StreamJSON
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		return admin.StreamJSON{}, fmt.Errorf("reading the stream's answer: %w", err)
	}
	if page.Next == "" {
		return admin.StreamJSON{}, errors.New("the stream's answer has no cursor")
	}
	return page, nil
}
