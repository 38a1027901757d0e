package jobs

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway/verify"
)

// resultBodyLimit is how much of a destination's answer is stored.
const resultBodyLimit = 4 << 10

// maxHold caps a destination's Retry-After.
const maxHold = time.Hour

// callResult is what one destination call (or a decision not to call)
// produced: how it ends, in dedupe's vocabulary, and what is stored.
type callResult struct {
	outcome dedupe.Outcome
	// called is true when a request went out: its delivery_attempts row
	// gets the outcome.
	called     bool
	statusCode int
	// wait is how long until the next try: the destination's Retry-After
	// or the entity's hold for OutcomeHold (0: the default hold), the
	// backoff for OutcomeRetry (set when settling).
	wait     time.Duration
	result   []byte // JSON stored as the run's result, for OutcomeDone
	err      string // short description for last_error, never the payload
	duration time.Duration
	// label, when set, replaces the settlement's metric label and names
	// the reason in its log line (a hold because the entity is busy).
	label string
	// sequence is the event's place in its entity (fifo), for the call.
	sequence int
	// holdReason says why an OutcomeHold waits; the run is shown held
	// with it.
	holdReason string
	// answer is what the destination answered, kept with the call.
	answer dedupe.Answer
	// sentBody is the start of a transformed body that was sent, kept
	// with the call; nil when the event's own payload was.
	sentBody []byte
	// cause, when set, names a failure that is no call's answer (a rule
	// that failed, an open circuit) for the destination's issues
	// (issueCause).
	cause string
	// tokenRefetched says the destination refused the call's OAuth2
	// token (401) and the call was made again with a new one.
	tokenRefetched bool
}

// storedResult is the JSON shape of job_runs.result.
type storedResult struct {
	StatusCode int               `json:"status_code"`
	Headers    map[string]string `json:"headers,omitempty"`
	Body       string            `json:"body,omitempty"`
	BodyBase64 string            `json:"body_base64,omitempty"`
	Truncated  bool              `json:"truncated,omitempty"`
	DurationMS float64           `json:"duration_ms"`
}

// headersOfNote are the answer headers kept with each call and in a done
// run's result: what the answer is, when to come back, where it points,
// and the ids a destination's operator looks its logs up by. Each value is
// kept up to maxNoteBytes.
var headersOfNote = []string{
	"Content-Type", "Retry-After", "Location", "Idempotency-Key", "Idempotent-Replayed", "Etag",
	"X-Request-Id", "Request-Id", "X-Correlation-Id", "X-Amzn-Requestid", "X-Amz-Request-Id", "Cf-Ray", "X-Github-Request-Id",
}

// maxNoteBytes bounds one kept header value.
const maxNoteBytes = 256

// notedHeaders returns the answer's headers of note, each value cut to
// maxNoteBytes on a UTF-8 boundary and made valid text (no control
// characters: jsonb refuses NUL), or nil when it has none. Location is
// kept with its credentials redacted (redactURL), as in last_error: a
// redirect can point at a URL with a token in it.
func notedHeaders(h http.Header) map[string]string {
	var out map[string]string
	for _, name := range headersOfNote {
		v := h.Get(name)
		if v == "" {
			continue
		}
		if name == "Location" {
			v = redactURL(v)
		}
		v = strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f {
				return -1
			}
			return r
		}, strings.ToValidUTF8(v, "\uFFFD"))
		if len(v) > maxNoteBytes {
			cut := maxNoteBytes
			for cut > 0 && !utf8.RuneStart(v[cut]) {
				cut--
			}
			v = v[:cut]
		}
		if out == nil {
			out = make(map[string]string)
		}
		out[name] = v
	}
	return out
}

// keptAnswer is the answer as kept with its call: its headers of note
// (notedHeaders) and the first resultBodyLimit bytes of the body (body
// holds up to one more, to tell a cut).
func keptAnswer(noted map[string]string, body []byte) dedupe.Answer {
	a := dedupe.Answer{Body: body}
	if len(body) > resultBodyLimit {
		a.Body, a.Truncated = body[:resultBodyLimit], true
	}
	if noted != nil {
		a.Headers, _ = json.Marshal(noted)
	}
	return a
}

// ReservedHeader reports whether the destination call sets the header
// itself, so forward_headers may not name it: the key, the Webhookd-*
// headers, the Standard Webhooks signature headers, tracing, and what
// HTTP itself owns.
func ReservedHeader(name string) bool {
	lower := strings.ToLower(name)
	switch lower {
	case "idempotency-key", "content-type", "content-length", "host", "user-agent", "connection",
		"transfer-encoding", "te", "trailer", "upgrade", "keep-alive", "proxy-connection",
		"traceparent", "tracestate", "webhook-id", "webhook-timestamp", "webhook-signature":
		return true
	}
	return strings.HasPrefix(lower, "webhookd-")
}

// ForwardedHeaders is what a destination of a source of scheme forwards
// (Destination.ForwardHeaders): the scheme's headers
// (verify.SchemeDefaults) and its own forward_headers, canonical, once
// each.
func ForwardedHeaders(scheme string, named []string) []string {
	var out []string
	for _, name := range append(slices.Clone(verify.SchemeDefaults(scheme).ForwardedHeaders), named...) {
		if name = http.CanonicalHeaderKey(name); !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// forwardHeaders sets on req the headers of stored (the event's stored
// headers, a JSON object of value lists) that names lists.
func forwardHeaders(req http.Header, stored []byte, names []string) {
	if len(names) == 0 || len(stored) == 0 {
		return
	}
	var h http.Header
	if json.Unmarshal(stored, &h) != nil {
		return
	}
	for _, name := range names {
		if vs := h.Values(name); len(vs) > 0 && !ReservedHeader(name) {
			req[http.CanonicalHeaderKey(name)] = vs
		}
	}
}

// callRequest is one call of a key to a destination.
type callRequest struct {
	dest        Destination
	key         string
	source      string
	eventID     string
	eventType   string
	call        int
	contentType string
	// headers are the event's stored request headers (JSON).
	headers []byte
	body    []byte
	// transformed says body is a transform's (Webhookd-Transformed: 1).
	transformed bool
	// entity is the event's ordered entity (Webhookd-Entity), sequence
	// its place in it in fifo mode (Webhookd-Sequence), else 0.
	entity   string
	sequence int
	// test marks a test event's call (Webhookd-Test: 1; TestSender).
	test bool
	now  time.Time
}

// callHeaders are the headers of a call whatever its kind: the sender's
// forwarded ones, the content type, the key, the Webhookd-* headers, the
// trace context and the signature (made over the body sent). An error
// means the call cannot be signed.
func callHeaders(ctx context.Context, r callRequest) (http.Header, error) {
	h := http.Header{}
	forwardHeaders(h, r.headers, r.dest.ForwardHeaders)
	for k, v := range r.dest.Headers {
		h.Set(k, v)
	}
	if r.contentType != "" {
		h.Set("Content-Type", r.contentType)
	}
	h.Set("User-Agent", "webhookd")
	h.Set("Idempotency-Key", r.key)
	h.Set("Webhookd-Source", r.source)
	h.Set("Webhookd-Event-Id", r.eventID)
	if r.eventType != "" {
		h.Set("Webhookd-Event-Type", r.eventType)
	}
	h.Set("Webhookd-Attempt", strconv.Itoa(r.call))
	if r.transformed {
		h.Set("Webhookd-Transformed", "1")
	}
	if r.test {
		h.Set("Webhookd-Test", "1")
	}
	if r.entity != "" {
		h.Set("Webhookd-Entity", r.entity)
	}
	if r.sequence > 0 {
		h.Set("Webhookd-Sequence", strconv.Itoa(r.sequence))
	}
	injectTraceContext(ctx, h)
	if r.dest.Signer != nil {
		// Standard Webhooks headers, as the verifier's own signer writes
		// them for a sender; the message id is the key.
		sig, _, err := r.dest.Signer.Sign(r.body, r.now, r.key)
		if err != nil {
			return nil, fmt.Errorf("could not sign the call: %w", err)
		}
		for k, v := range sig {
			h[k] = v
		}
	}
	return h, nil
}

// callDestination POSTs the event to the destination and classifies the
// answer per SPEC's table (package doc) and the destination's retry_on;
// client must not follow redirects (HandlerConfig.WithDefaults makes
// sure). A 401 to a call with an OAuth2 token fetches a new token and
// tries once more: that answer counts. It never returns an error: every
// failure is an outcome.
func callDestination(ctx context.Context, client *http.Client, r callRequest) callResult {
	ctx, cancel := context.WithTimeout(ctx, r.dest.Timeout)
	defer cancel()
	h, err := callHeaders(ctx, r)
	if err != nil {
		return callResult{outcome: dedupe.OutcomePermanent, err: err.Error()}
	}

	start := time.Now()
	resp, token, res, ok := post(ctx, client, r, h, "")
	refetched := ok && resp.StatusCode == http.StatusUnauthorized && r.dest.Auth.refetches()
	if refetched {
		drain(resp)
		resp.Body.Close()
		resp, _, res, ok = post(ctx, client, r, h, token)
	}
	if !ok {
		res.duration, res.tokenRefetched = time.Since(start), refetched
		return res
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, resultBodyLimit+1))
	drain(resp) // let the connection be reused
	d := time.Since(start)
	// The headers of note go both with the call and in a done run's
	// result: picked once.
	noted := notedHeaders(resp.Header)
	out := callResult{called: true, statusCode: resp.StatusCode, duration: d, answer: keptAnswer(noted, body), tokenRefetched: refetched}

	code := resp.StatusCode
	retryAfter, hasRetryAfter := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	switch {
	case code >= 200 && code < 300:
		out.outcome = dedupe.OutcomeDone
		out.result = encodeResult(resp.StatusCode, noted, body, d)
	case code >= 300 && code < 400:
		// Never followed (noRedirects): the payload, its signature and
		// key go to the configured URL only. A failed attempt, retried,
		// so a moved endpoint can be fixed in the config before the run
		// is dead.
		out.outcome = dedupe.OutcomeRetry
		out.err = fmt.Sprintf("destination redirected: HTTP %d", code)
		if loc := resp.Header.Get("Location"); loc != "" {
			out.err += " to " + redactURL(loc)
		}
		out.err += " (redirects are not followed)"
	case !r.dest.Retry.retries(code):
		out.outcome = dedupe.OutcomePermanent
		out.err = fmt.Sprintf("destination refused: HTTP %d", code)
		if r.dest.Retry.RetryOn != nil {
			out.err += " (not in retry_on)"
		}
	case code == http.StatusTooManyRequests || (code == http.StatusServiceUnavailable && hasRetryAfter):
		out.outcome = dedupe.OutcomeHold
		out.wait = retryAfter
		out.err = fmt.Sprintf("destination asked to wait: HTTP %d", code)
		out.holdReason = fmt.Sprintf("destination asked to wait (HTTP %d)", code)
	default:
		out.outcome = dedupe.OutcomeRetry
		out.err = fmt.Sprintf("destination answered HTTP %d", code)
	}
	return out
}

// post makes one try of a call with headers h and the destination's
// credential (refused: the OAuth2 token a first try was refused with).
// It returns the answer and the token sent, or, when there is no answer,
// ok false and the outcome.
func post(ctx context.Context, client *http.Client, r callRequest, h http.Header, refused string) (resp *http.Response, token string, res callResult, ok bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.dest.URL, bytes.NewReader(r.body))
	if err != nil {
		return nil, "", callResult{outcome: dedupe.OutcomePermanent, err: "invalid destination request: " + describeCallError(err, r.dest.URL)}, false
	}
	req.Header = h.Clone()
	if r.dest.Auth != nil {
		if token, err = r.dest.Auth.apply(ctx, client, req, refused); err != nil {
			// The destination was not called: a failed attempt, like a
			// broker that cannot be reached.
			return nil, "", callResult{outcome: dedupe.OutcomeRetry, err: "no credential: " + err.Error()}, false
		}
	}
	resp, err = client.Do(req)
	if err != nil {
		msg := "connection error"
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			msg = "timeout after " + r.dest.Timeout.String()
		}
		return nil, "", callResult{outcome: dedupe.OutcomeRetry, called: true, err: msg + ": " + describeCallError(err, r.dest.URL)}, false
	}
	return resp, token, callResult{}, true
}

// drain reads what is left of an answer's body, up to 1 MiB, so its
// connection can be reused.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
}

// noRedirects is the destination client's CheckRedirect: a redirect is
// the destination's answer, never followed.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// encodeResult is a done run's stored result: the answer's status code,
// its headers of note (notedHeaders), its body as kept, and the call's
// duration.
func encodeResult(statusCode int, noted map[string]string, body []byte, d time.Duration) []byte {
	res := storedResult{StatusCode: statusCode, DurationMS: float64(d.Microseconds()) / 1000, Headers: noted}
	if len(body) > resultBodyLimit {
		body, res.Truncated = body[:resultBodyLimit], true
	}
	if utf8.Valid(body) {
		res.Body = string(body)
	} else {
		res.BodyBase64 = base64.StdEncoding.EncodeToString(body)
	}
	b, _ := json.Marshal(res)
	return b
}

// parseRetryAfter reads delay-seconds or an HTTP date, capped at maxHold.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		d = time.Duration(min(secs, int64(maxHold/time.Second))) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = max(t.Sub(now), 0)
	} else {
		return 0, false
	}
	return min(d, maxHold), true
}

// describeCallError describes a failed call for last_error, the call log,
// the log line and Asynq's task, with the URL's credentials redacted
// (redactURL). net/http's error names the URL with its password masked
// but its user and query as configured.
func describeCallError(err error, rawURL string) string {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return redactIn(err.Error(), rawURL, "")
	}
	return ue.Op + " " + redactURL(rawURL) + ": " + redactIn(ue.Err.Error(), rawURL, ue.URL)
}

// redactIn replaces every spelling of the URLs in msg with rawURL
// redacted.
func redactIn(msg, rawURL, masked string) string {
	for _, u := range []string{rawURL, masked} {
		if u != "" {
			msg = strings.ReplaceAll(msg, u, redactURL(rawURL))
		}
	}
	return msg
}

// redactURL returns raw without the parts that may carry a credential:
// the userinfo and every query value (a query item without "=" whole)
// become "redacted" and a fragment is dropped; the scheme, host, port,
// path and query names stay, to say where a call went. A URL that does
// not parse is replaced whole.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "[unparseable URL]"
	}
	if u.Opaque != "" {
		return u.Scheme + ":redacted"
	}
	if u.User != nil {
		u.User = url.User("redacted")
	}
	if u.RawQuery != "" {
		items := strings.Split(u.RawQuery, "&")
		for i, item := range items {
			if name, _, ok := strings.Cut(item, "="); ok {
				items[i] = name + "=redacted"
			} else {
				items[i] = "redacted"
			}
		}
		u.RawQuery = strings.Join(items, "&")
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}
