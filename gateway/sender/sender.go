// Package sender signs a test event as a source's sender would and sends
// it to a gateway, several copies at once if asked: what `webhookd send`
// does, so a source can be tried end to end (and its deduplication seen).
package sender

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/webhookd/webhookd/gateway/eventid"
	"github.com/webhookd/webhookd/gateway/verify"
)

// Event is what to send.
type Event struct {
	// Source is the source's name (the :source path segment).
	Source string
	// Verify is the source's verification; SigningKey is the sender's
	// private key for schemes whose secrets are public keys.
	Verify verify.Config
	// EventID is where the source reads the event id.
	EventID eventid.Extractor
	// ID is the event id; empty makes a new random one.
	ID string
	// EventType, when it reads a header (github's X-GitHub-Event,
	// shopify's X-Shopify-Topic, ...), is where Type is sent, so a
	// destination's filter can be tried with the event; nil or a body
	// path sends nothing more.
	EventType *eventid.Extractor
	// Type is the event type sent in that header; empty sends
	// DefaultType.
	Type string
	// Body is sent as given; empty sends the scheme's test event.
	Body []byte
	// ContentType, when set, is the body's type (twilio's signer chooses
	// form or JSON by the body when it is not).
	ContentType string
}

// DefaultType is the type of the test event: the default body's, and
// the one sent in a type header.
const DefaultType = "demo.created"

// Request is an event signed, ready to send.
type Request struct {
	// URL is the gateway's webhook URL for the source, with the query the
	// scheme signs (twilio).
	URL string
	// Header holds the signature and the content type.
	Header http.Header
	// Body is what is sent.
	Body []byte
	// EventID is the id the gateway will read.
	EventID string
}

// Sign signs ev at now for the gateway at base (its base URL) as the
// source's sender would.
func Sign(ev Event, base string, now time.Time) (Request, error) {
	id := ev.ID
	if id == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		id = "evt_" + hex.EncodeToString(b[:])
	}
	body := ev.Body
	if len(body) == 0 {
		body = DefaultBody(ev.Verify, id, now)
	}
	body, err := verify.SignBody(ev.Verify, body, now)
	if err != nil {
		return Request{}, err
	}
	header, rawQuery, err := verify.Sign(ev.Verify, body, now, id)
	if err != nil {
		return Request{}, fmt.Errorf("error signing: %w", err)
	}
	if name, ok := ev.EventID.Header(); ok && header.Get(name) == "" {
		header.Set(name, id)
	}
	if ev.EventType != nil {
		if name, ok := ev.EventType.Header(); ok && header.Get(name) == "" {
			header.Set(name, cmp.Or(ev.Type, DefaultType))
		}
	}
	if ev.ContentType != "" {
		header.Set("Content-Type", ev.ContentType)
	} else if header.Get("Content-Type") == "" {
		header.Set("Content-Type", "application/json")
	}
	url := strings.TrimRight(base, "/") + "/webhooks/" + ev.Source
	if rawQuery != "" {
		url += "?" + rawQuery
	}
	// The id the gateway will see: a body of the operator's own carries
	// its own.
	if got, err := ev.EventID.Extract(header, body); err == nil {
		id = got
	}
	return Request{URL: url, Header: header, Body: body, EventID: id}, nil
}

// Send posts req n times, at most concurrency at once, and writes a line
// per answer to w. It returns an error when a copy got no answer or an
// answer other than 2xx.
func Send(ctx context.Context, w io.Writer, req Request, n, concurrency int) error {
	fmt.Fprintf(w, "sending event %s to %s, %d time(s), %d at once\n", req.EventID, req.URL, n, concurrency)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		sem  = make(chan struct{}, max(concurrency, 1))
		fail error
	)
	for i := 1; i <= n; i++ {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			r, err := http.NewRequestWithContext(ctx, http.MethodPost, req.URL, bytes.NewReader(req.Body))
			if err != nil {
				mu.Lock()
				fail = err
				mu.Unlock()
				return
			}
			r.Header = req.Header.Clone()
			resp, err := http.DefaultClient.Do(r)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				fmt.Fprintf(w, "#%d error: %v\n", i, err)
				fail = err
				return
			}
			defer resp.Body.Close()
			answer, _ := io.ReadAll(resp.Body)
			fmt.Fprintf(w, "#%d %d %s\n", i, resp.StatusCode, bytes.TrimSpace(answer))
			if resp.StatusCode >= 300 && fail == nil {
				fail = fmt.Errorf("the gateway answered %d", resp.StatusCode)
			}
		})
	}
	wg.Wait()
	return fail
}

// DefaultBody is the test event of a scheme: a small JSON event with id
// and type, or, for the schemes whose sender puts what verification
// checks in the body, one that carries it: msgraph's clientState (the
// first secret), linear's webhookTimestamp, mailgun's event and adyen's
// notification (their signatures are added before sending).
func DefaultBody(v verify.Config, id string, now time.Time) []byte {
	switch v.Scheme {
	case verify.SchemeMSGraph:
		if len(v.Secrets) == 0 {
			return nil
		}
		return fmt.Appendf(nil, `{"value":[{"subscriptionId":"sub_demo","changeType":"created","resource":"Users/demo/Messages/%s","resourceData":{"id":%q},"clientState":%q,"tenantId":"tenant_demo"}]}`,
			id, id, v.Secrets[0])
	case verify.SchemeLinear:
		return fmt.Appendf(nil, `{"action":"create","type":"Issue","data":{"id":%q,"title":"demo"},"webhookTimestamp":%d}`, id, now.UnixMilli())
	case verify.SchemeMailgun:
		return fmt.Appendf(nil, `{"event-data":{"event":"delivered","id":%q,"recipient":"demo@example.com"}}`, id)
	case verify.SchemeAdyen:
		return fmt.Appendf(nil, `{"live":"false","notificationItems":[{"NotificationRequestItem":{"amount":{"currency":"EUR","value":1000},"eventCode":"AUTHORISATION","merchantAccountCode":"DemoAccount","merchantReference":%q,"pspReference":%q,"success":"true"}}]}`, id, id)
	}
	if b := senderBody(v.Scheme, id, now); b != nil {
		return b
	}
	return fmt.Appendf(nil, `{"id":%q,"event_id":%q,"type":"demo.created","created":%d,"data":{"object":{"id":"obj_demo","amount":1000}}}`,
		id, id, now.Unix())
}
