package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway"
	"github.com/webhookd/webhookd/gateway/eventid"
	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/sink"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
)

// destination is an httptest destination recording every call's key.
type destination struct {
	*httptest.Server
	sink *sink.Sink
}

func newDestination(t *testing.T) *destination {
	s := sink.New(nil)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return &destination{Server: ts, sink: s}
}

func eventBody(id string) []byte {
	return fmt.Appendf(nil, `{"id":%q,"type":"charge.succeeded","data":{"object":{"id":"ch_1","amount":100}}}`, id)
}

func TestIngestAnswers(t *testing.T) {
	t.Parallel()
	dest := newDestination(t)
	p := pipelinetest.Start(t, pipelinetest.Options{Destinations: map[string]string{"billing": dest.URL}})

	t.Run("first delivery is accepted, repeats are duplicates with a count", func(t *testing.T) {
		body := eventBody("evt_first")
		code, answer := p.Send(t, body)
		if code != http.StatusAccepted {
			t.Fatalf("first delivery: got %d %s", code, answer)
		}
		var acc map[string]any
		_ = json.Unmarshal(answer, &acc)
		if acc["status"] != "accepted" || acc["event_id"] != "evt_first" || acc["source"] != "stripe" {
			t.Fatalf("first delivery answer: %s", answer)
		}
		for i := 2; i <= 3; i++ {
			code, answer = p.Send(t, body)
			var dup struct {
				Status     string `json:"status"`
				Deliveries int    `json:"deliveries"`
				State      string `json:"state"`
			}
			_ = json.Unmarshal(answer, &dup)
			if code != http.StatusOK || dup.Status != "duplicate" || dup.Deliveries != i || dup.State == "" {
				t.Fatalf("repeat %d: got %d %s", i, code, answer)
			}
		}
		key := "stripe:billing:evt_first"
		pipelinetest.Eventually(t, 10*time.Second, "delivery", func() bool { return dest.sink.Count(key) == 1 })
		var deliveries int
		var status string
		err := p.Schema.Pool.QueryRow(context.Background(), `
SELECT e.deliveries, r.status FROM event_deliveries e JOIN job_runs r ON r.source = e.source AND r.external_id = e.external_id
WHERE e.source = 'stripe' AND e.external_id = 'evt_first'`).Scan(&deliveries, &status)
		if err != nil {
			t.Fatal(err)
		}
		if deliveries != 3 {
			t.Errorf("deliveries = %d, want 3", deliveries)
		}
		pipelinetest.Eventually(t, 5*time.Second, "done", func() bool {
			_ = p.Schema.Pool.QueryRow(context.Background(), `SELECT status FROM job_runs WHERE key = $1`, key).Scan(&status)
			return status == "done"
		})
		_, answer = p.Send(t, body)
		if !strings.Contains(string(answer), `"state":"done"`) {
			t.Errorf("repeat after delivery: %s, want state done", answer)
		}
		time.Sleep(300 * time.Millisecond)
		if n := dest.sink.Count(key); n != 1 {
			t.Errorf("destination saw key %d times, want 1", n)
		}
	})

	rejections := []struct {
		name        string
		givenPath   string
		givenHeader func(body []byte) http.Header
		givenBody   []byte
		expectCode  int
		expectError string
	}{
		{
			name:        "unknown source",
			givenPath:   "/webhooks/nope",
			givenHeader: func([]byte) http.Header { return http.Header{} },
			givenBody:   eventBody("evt_unknown"),
			expectCode:  http.StatusNotFound,
			expectError: "unknown source",
		},
		{
			name:        "missing signature",
			givenHeader: func([]byte) http.Header { return http.Header{} },
			givenBody:   eventBody("evt_nosig"),
			expectCode:  http.StatusUnauthorized,
			expectError: "Stripe-Signature",
		},
		{
			name: "wrong secret",
			givenHeader: func(b []byte) http.Header {
				h, _, _ := verify.Sign(verify.Config{Scheme: "stripe", Secrets: []string{"whsec_wrong"}}, b, time.Now(), "")
				return h
			},
			givenBody:   eventBody("evt_wrong"),
			expectCode:  http.StatusUnauthorized,
			expectError: "signature",
		},
		{
			name: "stale timestamp",
			givenHeader: func(b []byte) http.Header {
				h, _, _ := verify.Sign(verify.Config{Scheme: "stripe", Secrets: []string{pipelinetest.Secret}}, b, time.Now().Add(-time.Hour), "")
				return h
			},
			givenBody:   eventBody("evt_stale"),
			expectCode:  http.StatusUnauthorized,
			expectError: "tolerance",
		},
		{
			name:        "no event id",
			givenHeader: signed,
			givenBody:   []byte(`{"type":"charge.succeeded"}`),
			expectCode:  http.StatusBadRequest,
			expectError: "event id",
		},
		{
			name:        "unparseable body",
			givenHeader: signed,
			givenBody:   []byte(`{"id": "evt_x",`),
			expectCode:  http.StatusBadRequest,
			expectError: "JSON",
		},
		{
			name:        "body over the limit",
			givenHeader: signed,
			givenBody:   []byte(`{"id":"evt_big","pad":"` + strings.Repeat("x", 70<<10) + `"}`),
			expectCode:  http.StatusRequestEntityTooLarge,
			expectError: "size limit",
		},
	}
	for _, tc := range rejections {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.givenPath
			if path == "" {
				path = "/webhooks/stripe"
			}
			before := p.Schema.Int(t, `SELECT count(*) FROM events`)
			code, answer := p.Post(t, path, tc.givenHeader(tc.givenBody), tc.givenBody)
			if code != tc.expectCode {
				t.Fatalf("got %d %s, want %d", code, answer, tc.expectCode)
			}
			var e struct {
				Error string `json:"error"`
			}
			if err := json.Unmarshal(answer, &e); err != nil || !strings.Contains(e.Error, tc.expectError) {
				t.Errorf("error body %s, want it to mention %q", answer, tc.expectError)
			}
			if strings.Contains(string(answer), pipelinetest.Secret) {
				t.Errorf("answer echoes the secret: %s", answer)
			}
			if after := p.Schema.Int(t, `SELECT count(*) FROM events`); after != before {
				t.Errorf("rejected delivery changed the events table: %d -> %d rows", before, after)
			}
		})
	}
}

func signed(b []byte) http.Header {
	h, _, _ := verify.Sign(verify.Config{Scheme: "stripe", Secrets: []string{pipelinetest.Secret}}, b, time.Now(), "")
	return h
}

// TestConcurrentCopiesOnTwoReplicas sends many copies of the same events
// at once to two gateway replicas sharing one database: each event gets
// one row, one 202, an exact delivery count, and one destination call.
func TestConcurrentCopiesOnTwoReplicas(t *testing.T) {
	t.Parallel()
	dest := newDestination(t)
	a := pipelinetest.Start(t, pipelinetest.Options{Destinations: map[string]string{"billing": dest.URL}})
	b := pipelinetest.Start(t, pipelinetest.Options{Destinations: map[string]string{"billing": dest.URL}, Schema: a.Schema, Redis: a.Redis})

	const events, copies = 20, 10
	var accepted, duplicates, other atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for e := range events {
		body := eventBody(fmt.Sprintf("evt_race_%d", e))
		for c := range copies {
			replica := a
			if c%2 == 1 {
				replica = b
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				code, _ := replica.Send(t, body)
				switch code {
				case http.StatusAccepted:
					accepted.Add(1)
				case http.StatusOK:
					duplicates.Add(1)
				default:
					other.Add(1)
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	if accepted.Load() != events || duplicates.Load() != events*(copies-1) || other.Load() != 0 {
		t.Fatalf("answers: %d accepted, %d duplicates, %d other; want %d, %d, 0",
			accepted.Load(), duplicates.Load(), other.Load(), events, events*(copies-1))
	}
	rows, err := a.Schema.Pool.Query(context.Background(), `SELECT external_id, deliveries FROM event_deliveries`)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var id string
		var deliveries int
		if err := rows.Scan(&id, &deliveries); err != nil {
			t.Fatal(err)
		}
		n++
		if deliveries != copies {
			t.Errorf("%s: deliveries = %d, want %d", id, deliveries, copies)
		}
	}
	if n != events {
		t.Fatalf("%d event rows, want %d", n, events)
	}
	pipelinetest.Eventually(t, 20*time.Second, "all events delivered", func() bool {
		return dest.sink.Stats().Keys == events
	})
	time.Sleep(500 * time.Millisecond)
	st := dest.sink.Stats()
	if st.Calls != events || len(st.Repeated) != 0 {
		t.Fatalf("destination saw %d calls for %d keys (repeated: %v), want %d once each", st.Calls, st.Keys, st.Repeated, events)
	}
}

// TestPostgresUnreachable answers 503 and records nothing when the
// database does not answer.
func TestPostgresUnreachable(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig("postgres://postgres@127.0.0.1:1/none?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	batcher := dedupe.NewBatcher(pool, dedupe.BatcherConfig{StatementTimeout: 2 * time.Second})
	defer batcher.Close()
	vcfg := verify.Config{Scheme: "stripe", Secrets: []string{pipelinetest.Secret}}
	v, _ := verify.New(vcfg)
	id, _ := eventid.Parse("json:id")
	var notified atomic.Int64
	srv := gateway.New(gateway.Config{
		Sources:  map[string]gateway.Source{"stripe": {Scheme: "stripe", Verifier: v, EventID: id}},
		Registry: prometheus.NewRegistry(),
	}, batcher, notifyFunc(func(string, string) { notified.Add(1) }))

	body := eventBody("evt_down")
	req := httptest.NewRequest(http.MethodPost, "/webhooks/stripe", strings.NewReader(string(body)))
	for k, v := range signed(body) {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("got %d %s, want 503", rec.Code, rec.Body)
	}
	if !strings.Contains(rec.Body.String(), `"error"`) || strings.Contains(rec.Body.String(), "127.0.0.1") {
		t.Errorf("503 body should be a JSON error without connection details: %s", rec.Body)
	}
	if notified.Load() != 0 {
		t.Errorf("an unrecorded event was handed off")
	}
}

type notifyFunc func(source, id string)

func (f notifyFunc) Notify(_ context.Context, ref dedupe.EventRef) { f(ref.Source, ref.ExternalID) }

// TestRepeatResumesAnInterruptedHandOff: an event committed whose hand-off
// never happened (the request was cancelled right after the commit) is
// handed off when the sender's retry arrives as a duplicate, without
// waiting for the reconciler.
func TestRepeatResumesAnInterruptedHandOff(t *testing.T) {
	t.Parallel()
	dest := newDestination(t)
	p := pipelinetest.Start(t, pipelinetest.Options{
		Destinations:   map[string]string{"billing": dest.URL},
		RecoveryMinAge: time.Hour, // the reconciler would not find it in time
	})
	body := eventBody("evt_interrupted")
	if _, err := dedupe.RecordBatch(context.Background(), p.Schema.Pool, []dedupe.Event{{
		Source: "stripe", ExternalID: "evt_interrupted", ContentType: "application/json", Payload: body,
	}}); err != nil {
		t.Fatal(err)
	}
	code, answer := p.Send(t, body)
	if code != http.StatusOK || !strings.Contains(string(answer), `"state":"received"`) {
		t.Fatalf("retry: got %d %s, want 200 duplicate in state received", code, answer)
	}
	key := "stripe:billing:evt_interrupted"
	pipelinetest.Eventually(t, 10*time.Second, "delivery after the retry", func() bool { return dest.sink.Count(key) == 1 })
	pipelinetest.Eventually(t, 10*time.Second, "the run done", func() bool {
		return p.Schema.Int(t, `SELECT count(*) FROM job_runs WHERE key = $1 AND status = 'done'`, key) == 1
	})
}

// TestCancelledRequestKeepsItsPayload: a sender gives up while its event
// waits for a statement. The batch still commits the event, and what it
// stores is that sender's body, not the bytes of a later request that
// reused the buffer.
func TestCancelledRequestKeepsItsPayload(t *testing.T) {
	t.Parallel()
	p := pipelinetest.Start(t, pipelinetest.Options{NoWorker: true})
	ctx := t.Context()
	// Inserts into events wait until the lock goes.
	lock, err := p.Schema.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(context.Background())
	if _, err := lock.Exec(ctx, `LOCK TABLE events IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	post := func(ctx context.Context, body []byte) error {
		h, _, err := verify.Sign(p.Verify, body, time.Now(), "")
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+"/webhooks/"+pipelinetest.Source, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header = h
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
	gone := eventBody("evt_gone_00")
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := post(short, gone); err == nil {
		t.Fatal("the request was answered while events were locked")
	}
	// Later requests of the same size, waiting too.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if err := post(ctx, eventBody(fmt.Sprintf("evt_next_%02d", i))); err != nil {
				t.Errorf("send: %v", err)
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	if err := lock.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	var stored []byte
	pipelinetest.Eventually(t, 10*time.Second, "the cancelled request's event", func() bool {
		return p.Schema.Pool.QueryRow(ctx, `SELECT payload FROM events WHERE external_id = 'evt_gone_00'`).Scan(&stored) == nil
	})
	if !bytes.Equal(stored, gone) {
		t.Fatalf("stored payload %q, want the sender's %q", stored, gone)
	}
}
