package listen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/webhookd/webhookd/gateway/admin"
)

// ErrRemoteForward is returned by Run for a URL to forward to that is not
// on this machine, unless Config.AllowRemote is set: events carry
// production payloads, and a typo must not send them elsewhere.
var ErrRemoteForward = errors.New("--forward-to is not on this machine (loopback); give --allow-remote to forward elsewhere")

// checkForwardTo validates the local URL: http or https, and on loopback
// (localhost, 127.0.0.0/8, ::1) unless remote is allowed.
func checkForwardTo(raw string, allowRemote bool) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--forward-to %q: want an http(s) URL such as http://localhost:3000/webhooks", raw)
	}
	if u.User != nil {
		return nil, fmt.Errorf("--forward-to: credentials in the URL are not supported")
	}
	if allowRemote {
		return u, nil
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return u, nil
	}
	return nil, fmt.Errorf("%w (got host %q)", ErrRemoteForward, u.Hostname())
}

// hopHeaders are the stored headers a forwarded call does not copy: what
// HTTP owns on each hop, and what the call sets itself.
var hopHeaders = map[string]bool{
	"Content-Length": true, "Transfer-Encoding": true, "Connection": true, "Keep-Alive": true,
	"Proxy-Connection": true, "Te": true, "Trailer": true, "Upgrade": true, "Host": true,
	"Content-Type": true, "Idempotency-Key": true, "Accept-Encoding": true,
}

// outcome is what one call to the local app came to.
type outcome struct {
	// status is the answer's status code; 0 when none came.
	status int
	// err says why no answer came.
	err error
	// duration is the call's.
	duration time.Duration
}

// settled reports whether the event is handled: a 2xx, or another 4xx
// than 408 and 429 (the app refused it; sending it again changes
// nothing). Anything else is retried: no answer, 5xx, 408, 429, a
// redirect (never followed: the payload goes to the given URL only).
func (o outcome) settled() bool {
	c := o.status
	return c >= 200 && c < 300 || (c >= 400 && c < 500 && c != http.StatusRequestTimeout && c != http.StatusTooManyRequests)
}

// String says what the call came to, for a notice.
func (o outcome) String() string {
	if o.status == 0 {
		return "no answer: " + o.err.Error()
	}
	return "HTTP " + strconv.Itoa(o.status)
}

// forwarder calls the local app.
type forwarder struct {
	target   *url.URL
	client   *http.Client
	resign   string // the development secret, or ""
	now      func() time.Time
	signings map[string]admin.SigningJSON
	// unsigned is told, once per source, that its events go out without
	// a new signature because they cannot be re-signed.
	unsigned func(source string, err error)
}

// request builds the call of ev, its call-th: the event's body and
// headers, the Webhookd-* headers, and with a development secret a
// signature made now. An event that cannot be re-signed (a scheme that
// signs with a private key, a source the gateway no longer has) goes
// out as recorded, and f.unsigned is told: the app's answer shows the
// developer what it makes of it, and the stream goes on.
func (f *forwarder) request(ctx context.Context, ev admin.StreamEventJSON, call int) (*http.Request, error) {
	body, target := ev.Payload, *f.target
	var signed http.Header
	if f.resign != "" {
		r, err := f.resignEvent(ev)
		if err != nil {
			f.unsigned(ev.Source, err)
		} else {
			body, signed = r.body, r.header
			if r.rawQuery != "" {
				if target.RawQuery != "" {
					target.RawQuery += "&"
				}
				target.RawQuery += r.rawQuery
			}
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for name, values := range ev.Headers {
		name = http.CanonicalHeaderKey(name)
		if hopHeaders[name] || strings.HasPrefix(name, "Webhookd-") {
			continue
		}
		req.Header[name] = values
	}
	if ev.ContentType != "" {
		req.Header.Set("Content-Type", ev.ContentType)
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "webhookd-listen")
	}
	req.Header.Set("Idempotency-Key", ev.Key)
	req.Header.Set("Webhookd-Source", ev.Source)
	req.Header.Set("Webhookd-Event-Id", ev.EventID)
	if ev.EventType != "" {
		req.Header.Set("Webhookd-Event-Type", ev.EventType)
	}
	req.Header.Set("Webhookd-Attempt", strconv.Itoa(call))
	for name, values := range signed {
		req.Header[name] = values
	}
	return req, nil
}

// resignEvent signs ev with the development secret by its source's
// scheme, as the last stream answer described it.
func (f *forwarder) resignEvent(ev admin.StreamEventJSON) (resigned, error) {
	signing, ok := f.signings[ev.Source]
	if !ok {
		return resigned{}, fmt.Errorf("%w: the gateway did not say how source %s signs (is it still configured?)", errCannotResign, ev.Source)
	}
	return resign(signing, f.resign, ev.Payload, f.now(), ev.EventID, f.target.String())
}

// call forwards ev once. It is not cut short by ctx ending (a stop
// signal): a call under way is finished, within the client's timeout, so
// its answer is known and recorded before the process exits.
func (f *forwarder) call(ctx context.Context, ev admin.StreamEventJSON, call int) (outcome, error) {
	req, err := f.request(context.WithoutCancel(ctx), ev, call)
	if err != nil {
		return outcome{}, fmt.Errorf("error building the call of %s %s: %w", ev.Source, ev.EventID, err)
	}
	start := time.Now()
	resp, err := f.client.Do(req)
	if err != nil {
		return outcome{err: describeCallError(err), duration: time.Since(start)}, nil
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	return outcome{status: resp.StatusCode, duration: time.Since(start)}, nil
}

// describeCallError shortens a client error to its cause: the URL is
// known and said once.
func describeCallError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}
