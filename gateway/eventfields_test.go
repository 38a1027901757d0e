package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
)

// TestIngestRefusesUnstorableFields: a value that cannot be stored as
// text (or has no bound) is answered 400 or 431 at the edge, with a
// message naming the field but not its value, and nothing is recorded.
func TestIngestRefusesUnstorableFields(t *testing.T) {
	t.Parallel()
	p := pipelinetest.Start(t, pipelinetest.Options{
		NoWorker:    true,
		OrderEntity: "json:data.object.id", OrderVersion: "json:created",
	})
	manyHeaders := func(h http.Header) {
		for i := range 40 {
			h.Set(fmt.Sprintf("X-Pad-%02d", i), strings.Repeat("p", 1000))
		}
	}
	for _, tc := range []struct {
		name         string
		givenBody    string
		givenHeader  func(http.Header)
		expectCode   int
		expectError  string
		expectAbsent string // a value that must not be echoed
	}{
		{"content type not UTF-8", `{"id":"evt_ct_utf8"}`,
			func(h http.Header) { h.Set("Content-Type", "application/json\xff") }, http.StatusBadRequest, "Content-Type", "\xff"},
		{"content type too long", `{"id":"evt_ct_long"}`,
			func(h http.Header) { h.Set("Content-Type", "application/json; x="+strings.Repeat("y", 400)) }, http.StatusBadRequest, "Content-Type", "yyyy"},
		{"content type with a tab", `{"id":"evt_ct_tab"}`,
			func(h http.Header) { h.Set("Content-Type", "application/json;\tx=1") }, http.StatusBadRequest, "Content-Type", ""},
		{"order entity with a control character", `{"id":"evt_order","created":5,"data":{"object":{"id":"ent\u0001"}}}`,
			func(http.Header) {}, http.StatusBadRequest, "order field", ""},
		{"too many header bytes to store", `{"id":"evt_headers_big"}`,
			manyHeaders, http.StatusRequestHeaderFieldsTooLarge, "too large", "pppp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := signed([]byte(tc.givenBody))
			h.Set("Content-Type", "application/json")
			tc.givenHeader(h)
			code, answer := p.Post(t, "/webhooks/stripe", h, []byte(tc.givenBody))
			var e struct {
				Error string `json:"error"`
			}
			if code != tc.expectCode || json.Unmarshal(answer, &e) != nil || !strings.Contains(e.Error, tc.expectError) {
				t.Fatalf("got %d %s, want %d with an error naming %q", code, answer, tc.expectCode, tc.expectError)
			}
			if tc.expectAbsent != "" && strings.Contains(string(answer), tc.expectAbsent) {
				t.Errorf("answer echoes the value: %s", answer)
			}
			if n := p.Schema.Int(t, `SELECT count(*) FROM events`); n != 0 {
				t.Errorf("%d events recorded", n)
			}
		})
	}

	// A NUL in a header never comes through net/http's parser; the
	// handler refuses it all the same.
	body := []byte(`{"id":"evt_nul_header"}`)
	req := httptest.NewRequest(http.MethodPost, "/webhooks/stripe", strings.NewReader(string(body)))
	for k, v := range signed(body) {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Trace", "a\x00b")
	rec := httptest.NewRecorder()
	p.Process.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "X-Trace") {
		t.Errorf("NUL in a header: %d %s, want 400 naming X-Trace", rec.Code, rec.Body)
	}
	if n := p.Schema.Int(t, `SELECT count(*) FROM events`); n != 0 {
		t.Errorf("%d events recorded", n)
	}
}

// TestPoisonedRequestsHurtNoOne: while an attacker replays captured
// signed requests with poisoned fields (a Content-Type that is not UTF-8,
// an id that is not, headers without a bound), legitimate senders sharing
// the same group-commit statements are all answered 202 or 200 and
// recorded; the poisoned requests get 400 or 431 and write nothing.
func TestPoisonedRequestsHurtNoOne(t *testing.T) {
	t.Parallel()
	p := pipelinetest.Start(t, pipelinetest.Options{NoWorker: true})

	const senders, perSender = 8, 25
	done := make(chan struct{})
	var attacks, attackErrors atomic.Int64
	var attackers sync.WaitGroup
	for a := range 8 {
		attackers.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				id := fmt.Sprintf("evt_poison_%d_%d", a, i)
				body := eventBody(id)
				h := signed(body)
				h.Set("Content-Type", "application/json")
				want := http.StatusBadRequest
				switch i % 3 {
				case 0:
					h.Set("Content-Type", "application/json\xff\xfe")
				case 1:
					body = eventBody(id + "\xff")
					h = signed(body)
				case 2:
					for j := range 20 {
						h.Set(fmt.Sprintf("X-Pad-%02d", j), strings.Repeat("p", 1000))
					}
					want = http.StatusRequestHeaderFieldsTooLarge
				}
				code, answer := p.Post(t, "/webhooks/stripe", h, body)
				attacks.Add(1)
				if code != want {
					attackErrors.Add(1)
					t.Errorf("poisoned request %s: %d %s, want %d", id, code, answer, want)
				}
				if i%3 == 0 && !strings.Contains(string(answer), "Content-Type") {
					t.Errorf("poisoned Content-Type refused without naming it: %s", answer)
				}
			}
		})
	}

	var senderWG sync.WaitGroup
	var answered atomic.Int64
	for s := range senders {
		senderWG.Go(func() {
			for i := range perSender {
				body := eventBody(fmt.Sprintf("evt_legit_%d_%02d", s, i))
				if code, answer := p.Send(t, body); code != http.StatusAccepted {
					t.Errorf("legitimate delivery %d/%d: %d %s, want 202", s, i, code, answer)
					continue
				}
				if code, answer := p.Send(t, body); code != http.StatusOK {
					t.Errorf("legitimate repeat %d/%d: %d %s, want 200", s, i, code, answer)
					continue
				}
				answered.Add(1)
			}
		})
	}
	senderWG.Wait()
	close(done)
	attackers.Wait()

	if got := answered.Load(); got != senders*perSender {
		t.Errorf("%d of %d legitimate events answered 202 then 200", got, senders*perSender)
	}
	if got := p.Schema.Int(t, `SELECT count(*) FROM event_deliveries WHERE external_id LIKE 'evt_legit_%' AND deliveries = 2`); got != senders*perSender {
		t.Errorf("%d legitimate events recorded with 2 deliveries, want %d", got, senders*perSender)
	}
	if got := p.Schema.Int(t, `SELECT count(*) FROM events WHERE external_id NOT LIKE 'evt_legit_%'`); got != 0 {
		t.Errorf("%d poisoned events recorded", got)
	}
	if attacks.Load() < senders {
		t.Errorf("only %d poisoned requests were sent alongside", attacks.Load())
	}
	t.Logf("%d poisoned requests alongside %d legitimate ones", attacks.Load(), 2*senders*perSender)
}
