package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway"
	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/glob"
	"github.com/webhookd/webhookd/jobs"
)

// The event stream, GET /admin/events/stream, follows the events the
// gateway records (dedupe's event feed) from a cursor, by long poll: an
// answer comes as soon as there are events after the cursor, or after
// wait with none, and carries the cursor to ask after next. A follower
// that keeps the last cursor it handled (webhookd listen) resumes there
// after any disconnect or restart and misses nothing: the feed never
// hands out a position before one it already gave. A read-only token is
// enough. Each event carries its raw body and its stored headers (a
// signature or credential stored masked is left out), and the answer
// says how each of its sources signs, never a secret, so the follower
// can sign a copy with a development secret.
//
// Query: after=<cursor> (as an answer's next or an event's cursor gave
// it) or after=now (the default) or since=<RFC 3339 time, or a duration
// back from now>; source=<name>; type=<glob>; limit=<1..1000, default
// 100>; wait=<0s..10s, default 10s>; count=1 adds how many events wait
// after next (among the next 10,000).

// Bounds of a stream request.
const (
	// maxStreamWait is the longest a stream request waits for an event.
	// It stays under the HTTP server's read timeout, which cancels a
	// request still running past it, and bounds how long a shutdown
	// waits for a follower's request.
	maxStreamWait = 10 * time.Second
	// streamPoll is how often a waiting stream request reads the feed
	// again: the lag it adds to an event, half of it on average.
	streamPoll = 100 * time.Millisecond
	// streamCountMost is how far count=1 looks past next.
	streamCountMost = 10000
	// listenDestination is the destination name in the key of an event
	// a follower forwards: <source>:listen:<id>.
	listenDestination = "listen"
)

// StreamJSON is GET /admin/events/stream's answer.
type StreamJSON struct {
	// Events are in feed order; each one's Cursor resumes after it.
	Events []StreamEventJSON `json:"events"`
	// Next is the cursor to ask after next: past the events, or further
	// when none (or none the filter keeps) came.
	Next string `json:"next"`
	// More is true when events may follow Next already: ask again at
	// once.
	More bool `json:"more"`
	// Behind, with count=1, counts the events after Next that the filter
	// keeps, among the next 10,000 recorded; BehindAtLeast says there
	// may be more.
	Behind        *int `json:"behind,omitempty"`
	BehindAtLeast bool `json:"behind_at_least,omitempty"`
	// Sources says how each source of Events signs.
	Sources map[string]SigningJSON `json:"sources,omitempty"`
}

// StreamEventJSON is one event of the stream.
type StreamEventJSON struct {
	// Cursor is the event's position: ask after it to continue past it.
	Cursor string `json:"cursor"`
	// Key is the key a follower forwards the event with:
	// <source>:listen:<id>.
	Key        string    `json:"key"`
	Source     string    `json:"source"`
	EventID    string    `json:"event_id"`
	EventType  string    `json:"event_type,omitempty"`
	ReceivedAt time.Time `json:"received_at"`
	// ContentType is the request's Content-Type.
	ContentType string `json:"content_type"`
	// Headers are the request's stored headers, canonical names; those
	// stored masked (a signature, a credential) are left out.
	Headers map[string][]string `json:"headers"`
	// Payload is the raw body (base64 in JSON).
	Payload []byte `json:"payload"`
}

// SigningJSON is how a source signs: the scheme and hmac-sha256's
// settings, never a secret (gateway.SigningSettings).
type SigningJSON struct {
	Scheme          string  `json:"scheme"`
	Header          string  `json:"header,omitempty"`
	Encoding        string  `json:"encoding,omitempty"`
	Prefix          *string `json:"prefix,omitempty"`
	TimestampHeader string  `json:"timestamp_header,omitempty"`
	SignedContent   string  `json:"signed_content,omitempty"`
}

// VerifyConfig returns the verify configuration s describes, with no
// secret: the caller adds the one to sign with.
func (s SigningJSON) VerifyConfig() verify.Config {
	return verify.Config{
		Scheme: s.Scheme, Header: s.Header, Encoding: s.Encoding, Prefix: s.Prefix,
		TimestampHeader: s.TimestampHeader, SignedContent: s.SignedContent,
	}
}

func signingJSON(v verify.Config) SigningJSON {
	v = gateway.SigningSettings(v)
	return SigningJSON{
		Scheme: v.Scheme, Header: v.Header, Encoding: v.Encoding, Prefix: v.Prefix,
		TimestampHeader: v.TimestampHeader, SignedContent: v.SignedContent,
	}
}

// streamRequest is a validated stream request.
type streamRequest struct {
	start  func(ctx context.Context) (dedupe.FeedCursor, error)
	filter dedupe.FeedFilter
	limit  int
	wait   time.Duration
	count  bool
}

// streamRequestFrom validates the stream's query: a 400 for a value it
// cannot use, 422 for an unknown source.
func (a *Admin) streamRequestFrom(c echo.Context) (streamRequest, error) {
	q := c.QueryParams()
	for name := range q {
		if !slices.Contains([]string{"after", "since", "source", "type", "limit", "wait", "count"}, name) {
			return streamRequest{}, echo.NewHTTPError(http.StatusBadRequest, fmt.Sprintf("unknown parameter %q", name))
		}
	}
	after, since := q.Get("after"), q.Get("since")
	r := streamRequest{
		filter: dedupe.FeedFilter{Source: q.Get("source"), Type: strings.TrimSpace(q.Get("type"))},
		limit:  dedupe.DefaultFeedLimit,
		wait:   maxStreamWait,
	}
	if err := checkText(textInput{"after", after, maxCursorBytes}, textInput{"since", since, maxNameBytes},
		textInput{"source", r.filter.Source, maxNameBytes}, textInput{"type", r.filter.Type, maxIDBytes}); err != nil {
		return r, echo.NewHTTPError(http.StatusBadRequest, err.Error())
	}
	if err := a.checkName("source", r.filter.Source, a.sources()); err != nil {
		return r, echo.NewHTTPError(http.StatusBadRequest, err.Error())
	}
	if r.filter.Type != "" {
		if _, err := glob.Compile(r.filter.Type); err != nil {
			return r, echo.NewHTTPError(http.StatusBadRequest, "type: "+err.Error())
		}
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > dedupe.MaxFeedLimit {
			return r, echo.NewHTTPError(http.StatusBadRequest, fmt.Sprintf("limit must be 1..%d", dedupe.MaxFeedLimit))
		}
		r.limit = n
	}
	if w := q.Get("wait"); w != "" {
		d, err := time.ParseDuration(w)
		if err != nil || d < 0 || d > maxStreamWait {
			return r, echo.NewHTTPError(http.StatusBadRequest, "wait must be a duration from 0s to "+maxStreamWait.String())
		}
		r.wait = d
	}
	switch v := q.Get("count"); v {
	case "", "0", "false":
	case "1", "true":
		r.count = true
	default:
		return r, echo.NewHTTPError(http.StatusBadRequest, "count must be 1 or 0")
	}
	switch {
	case after != "" && since != "":
		return r, echo.NewHTTPError(http.StatusBadRequest, "give after or since, not both")
	case since != "":
		t, err := ParseTime(since, time.Now())
		if err != nil {
			return r, echo.NewHTTPError(http.StatusBadRequest, "since: "+err.Error())
		}
		r.start = func(ctx context.Context) (dedupe.FeedCursor, error) { return a.events.FeedSince(ctx, t) }
	case after == "" || after == "now":
		r.start = a.events.FeedHead
	default:
		cur, err := dedupe.ParseFeedCursor(after)
		if err != nil {
			return r, echo.NewHTTPError(http.StatusBadRequest, "after: "+err.Error())
		}
		r.start = func(context.Context) (dedupe.FeedCursor, error) { return cur, nil }
	}
	return r, nil
}

// streamEvents handles GET /admin/events/stream.
func (a *Admin) streamEvents(c echo.Context) error {
	r, err := a.streamRequestFrom(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	pos, err := r.start(ctx)
	if err != nil {
		return httpError(err)
	}
	page, err := a.waitForEvents(ctx, pos, r)
	if err != nil {
		if ctx.Err() != nil {
			return nil // the follower left; nobody reads an answer
		}
		return httpError(err)
	}
	out := StreamJSON{Events: make([]StreamEventJSON, 0, len(page.Events)), Next: page.Next.String(), More: page.More}
	for _, ev := range page.Events {
		out.Events = append(out.Events, streamEventJSON(ev, a.gatewaySources()[ev.Source].SignatureHeader))
		if src, ok := a.gatewaySources()[ev.Source]; ok {
			if out.Sources == nil {
				out.Sources = map[string]SigningJSON{}
			}
			out.Sources[ev.Source] = signingJSON(src.Signing)
		}
	}
	if r.count {
		n, complete, err := a.events.FeedBacklog(ctx, page.Next, r.filter, streamCountMost)
		if err != nil {
			return httpError(err)
		}
		out.Behind, out.BehindAtLeast = &n, !complete
	}
	a.requestLog(c).DebugContext(ctx, "event stream answered", slog.Int("events", len(out.Events)),
		slog.String("next", out.Next), slog.Bool("more", out.More))
	return c.JSON(http.StatusOK, out)
}

// waitForEvents reads the feed after pos until it has events (or says
// there are more), r.wait has passed, or ctx ends.
func (a *Admin) waitForEvents(ctx context.Context, pos dedupe.FeedCursor, r streamRequest) (dedupe.FeedPage, error) {
	deadline := time.Now().Add(r.wait)
	tick := time.NewTicker(streamPoll)
	defer tick.Stop()
	for {
		page, err := a.events.ReadFeed(ctx, dedupe.FeedRequest{After: pos, Filter: r.filter, Limit: r.limit})
		if err != nil {
			return page, err
		}
		if len(page.Events) > 0 || page.More || !time.Now().Before(deadline) {
			return page, nil
		}
		pos = page.Next
		select {
		case <-ctx.Done():
			return page, ctx.Err()
		case <-tick.C:
		}
	}
}

// streamEventJSON renders a feed event, its stored headers less those
// stored masked.
func streamEventJSON(ev dedupe.FeedEvent, signatureHeader string) StreamEventJSON {
	out := StreamEventJSON{
		Cursor: ev.Cursor.String(), Key: jobs.Key(ev.Source, listenDestination, ev.ExternalID, 1),
		Source: ev.Source, EventID: ev.ExternalID, EventType: ev.EventType, ReceivedAt: ev.ReceivedAt,
		ContentType: ev.ContentType, Headers: map[string][]string{}, Payload: ev.Payload,
	}
	if out.Payload == nil {
		out.Payload = []byte{}
	}
	var stored map[string][]string
	if err := json.Unmarshal(gateway.MaskHeaders(ev.Headers, signatureHeader), &stored); err != nil {
		return out
	}
	for name, values := range stored {
		var kept []string
		for _, v := range values {
			if !strings.HasPrefix(v, "[masked: ") {
				kept = append(kept, v)
			}
		}
		if len(kept) > 0 {
			out.Headers[http.CanonicalHeaderKey(name)] = kept
		}
	}
	return out
}
