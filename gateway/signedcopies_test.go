package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway"
	"github.com/webhookd/webhookd/gateway/eventid"
	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/testkit/logtest"
	"github.com/webhookd/webhookd/internal/testkit/pgtest"
)

// copySource is a sender whose event id its signature does not cover.
type copySource struct {
	name, idHeader string
	cfg            verify.Config
	body           func(n int) []byte
}

func copySources() []copySource {
	jsonBody := func(n int) []byte { return fmt.Appendf(nil, `{"action":"labeled","issue":{"number":%d}}`, n) }
	return []copySource{
		{"github", "X-Github-Delivery", verify.Config{Scheme: verify.SchemeGitHub, Secrets: []string{"gh-secret"}}, jsonBody},
		{"shopify", "X-Shopify-Event-Id", verify.Config{Scheme: verify.SchemeShopify, Secrets: []string{"shpss_secret"}}, jsonBody},
		{"twilio", "I-Twilio-Idempotency-Token", verify.Config{Scheme: verify.SchemeTwilio, Secrets: []string{"twilio-token"},
			PublicURL: "https://hooks.example.com/webhooks/twilio"},
			func(n int) []byte {
				return fmt.Appendf(nil, "MessageSid=SM%d&MessageStatus=delivered&To=%%2B15551234567", n)
			}},
	}
}

// copiesBundle is a gateway recording into its own schema, with every
// copySource under the given window.
type copiesBundle struct {
	schema *pgtest.Schema
	srv    *httptest.Server
}

func startCopies(t *testing.T, window time.Duration) *copiesBundle {
	t.Helper()
	schema := pgtest.New(t)
	batcher := dedupe.NewBatcher(schema.Pool, dedupe.BatcherConfig{})
	t.Cleanup(batcher.Close)
	sources := map[string]gateway.Source{}
	for _, cs := range copySources() {
		v, err := verify.New(cs.cfg)
		if err != nil {
			t.Fatal(err)
		}
		id, err := eventid.Parse(verify.SchemeDefaults(cs.cfg.Scheme).EventID)
		if err != nil {
			t.Fatal(err)
		}
		sources[cs.name] = gateway.Source{Scheme: cs.cfg.Scheme, Verifier: v, EventID: id, ContentWindow: window}
	}
	srv := httptest.NewServer(gateway.New(gateway.Config{Sources: sources, Registry: prometheus.NewRegistry(),
		Logger: logtest.New(t, 0)}, batcher, nil))
	t.Cleanup(srv.Close)
	return &copiesBundle{schema: schema, srv: srv}
}

// capture is a signed delivery as it went over the wire.
type capture struct {
	source   copySource
	header   http.Header
	rawQuery string
	body     []byte
}

func signCapture(t *testing.T, cs copySource, body []byte, id string) capture {
	t.Helper()
	h, q, err := verify.Sign(cs.cfg, body, time.Now(), id)
	if err != nil {
		t.Fatal(err)
	}
	return capture{source: cs, header: h, rawQuery: q, body: body}
}

// send posts the capture with its event id header set to id.
func (b *copiesBundle) send(t *testing.T, c capture, id string) (int, map[string]any) {
	t.Helper()
	u := b.srv.URL + "/webhooks/" + c.source.name
	if c.rawQuery != "" {
		u += "?" + c.rawQuery
	}
	req, err := http.NewRequest(http.MethodPost, u, bytes.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = c.header.Clone()
	req.Header.Set(c.source.idHeader, id)
	if req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&answer)
	return resp.StatusCode, answer
}

// TestCopiesUnderFreshIDsAreDuplicates: GitHub, Shopify and Twilio leave
// their event id out of the signature, so a captured delivery sent again
// under a fresh id verified and was recorded (and forwarded) as a new
// event, as often as anyone liked. With the guard, such a copy is a
// duplicate of the event first recorded with that signed content and
// records nothing; the sender's own retry (same id) is counted as usual,
// and distinct events are recorded.
func TestCopiesUnderFreshIDsAreDuplicates(t *testing.T) {
	t.Parallel()
	for _, cs := range copySources() {
		t.Run(cs.name, func(t *testing.T) {
			t.Parallel()
			b := startCopies(t, time.Hour)
			orig := signCapture(t, cs, cs.body(1), "id-1")
			if code, answer := b.send(t, orig, "id-1"); code != http.StatusAccepted {
				t.Fatalf("first delivery: %d %v", code, answer)
			}
			for i := range 3 {
				fresh := fmt.Sprintf("replayed-%d", i)
				code, answer := b.send(t, orig, fresh)
				if code != http.StatusOK || answer["status"] != "duplicate" || answer["event_id"] != "id-1" || answer["deliveries"] != 1.0 {
					t.Fatalf("copy under id %s: %d %v, want 200 duplicate of id-1 with 1 delivery", fresh, code, answer)
				}
			}
			if cs.name == "twilio" {
				// The signature covers the sorted parameters, not the
				// bytes: reordered and re-escaped, it is the same content.
				params, _ := url.ParseQuery(string(orig.body))
				reordered := orig
				reordered.body = []byte(params.Encode())
				if code, answer := b.send(t, reordered, "replayed-reordered"); code != http.StatusOK || answer["event_id"] != "id-1" {
					t.Fatalf("reordered copy: %d %v, want a duplicate of id-1", code, answer)
				}
			}
			if code, answer := b.send(t, orig, "id-1"); code != http.StatusOK || answer["deliveries"] != 2.0 {
				t.Fatalf("the sender's retry: %d %v, want its second delivery", code, answer)
			}
			if code, answer := b.send(t, signCapture(t, cs, cs.body(2), "id-2"), "id-2"); code != http.StatusAccepted {
				t.Fatalf("a distinct event: %d %v, want it recorded", code, answer)
			}
			if got := b.schema.Int(t, `SELECT count(*) FROM events`); got != 2 {
				t.Errorf("%d events recorded, want 2 (id-1 and id-2)", got)
			}
			if got := b.schema.Int(t, `SELECT deliveries FROM event_deliveries WHERE external_id = 'id-1'`); got != 2 {
				t.Errorf("id-1 has %d deliveries, want 2 (copies are not the sender's)", got)
			}
			if got := b.schema.Int(t, `SELECT count(*) FROM event_outbox`); got != 2 {
				t.Errorf("%d events handed to the queue, want 2", got)
			}
		})
	}
}

// TestCopiesGuardOffAndExpired: without the guard (github's and
// shopify's default) a copy is a new event; with it, a copy after the
// window is too, and takes the content over.
func TestCopiesGuardOffAndExpired(t *testing.T) {
	t.Parallel()
	cs := copySources()[0]
	t.Run("off", func(t *testing.T) {
		t.Parallel()
		b := startCopies(t, 0)
		orig := signCapture(t, cs, cs.body(1), "id-1")
		for _, id := range []string{"id-1", "id-2"} {
			if code, answer := b.send(t, orig, id); code != http.StatusAccepted {
				t.Fatalf("%s: %d %v, want 202", id, code, answer)
			}
		}
	})
	t.Run("expired", func(t *testing.T) {
		t.Parallel()
		b := startCopies(t, 300*time.Millisecond)
		orig := signCapture(t, cs, cs.body(1), "id-1")
		if code, _ := b.send(t, orig, "id-1"); code != http.StatusAccepted {
			t.Fatalf("first: %d", code)
		}
		time.Sleep(400 * time.Millisecond)
		if code, answer := b.send(t, orig, "id-2"); code != http.StatusAccepted {
			t.Fatalf("after the window: %d %v, want 202", code, answer)
		}
		if code, answer := b.send(t, orig, "id-3"); code != http.StatusOK || answer["event_id"] != "id-2" {
			t.Fatalf("within id-2's window: %d %v, want a duplicate of id-2", code, answer)
		}
	})
}

// TestCopiesAtOnce: copies under distinct ids sent at the same instant
// (so several share a statement, others wait for its digest) give one
// event; every other answer names it.
func TestCopiesAtOnce(t *testing.T) {
	t.Parallel()
	cs := copySources()[0]
	b := startCopies(t, time.Hour)
	orig := signCapture(t, cs, cs.body(1), "")
	const n = 24
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		codes   = map[int]int{}
		firstOf = map[any]int{}
		start   = make(chan struct{})
	)
	for i := range n {
		wg.Go(func() {
			<-start
			code, answer := b.send(t, orig, fmt.Sprintf("id-%d", i))
			mu.Lock()
			defer mu.Unlock()
			codes[code]++
			firstOf[answer["event_id"]]++
		})
	}
	close(start)
	wg.Wait()
	if codes[http.StatusAccepted] != 1 || codes[http.StatusOK] != n-1 || len(firstOf) != 1 {
		t.Fatalf("answers %v naming %v, want one 202 and %d duplicates of that one event", codes, firstOf, n-1)
	}
	if got := b.schema.Int(t, `SELECT count(*) FROM events`); got != 1 {
		t.Fatalf("%d events recorded, want 1", got)
	}
}
