package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway/admin"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/jobs"
)

// entitySink records, per entity, the events in the order their calls
// came, the most calls of one entity in flight at once, and the most
// calls in flight overall; answer decides each call's status.
type entitySink struct {
	*httptest.Server
	mu             sync.Mutex
	order          map[string][]string
	sequences      map[string][]int
	inFlight       map[string]int
	mostPerEntity  int
	total, mostAll int
	answer         func(id string, n int) int
	tries          map[string]int
}

func newEntitySink(t *testing.T, answer func(id string, n int) int) *entitySink {
	s := &entitySink{order: map[string][]string{}, sequences: map[string][]int{}, inFlight: map[string]int{},
		tries: map[string]int{}, answer: answer}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entity, id := r.Header.Get("Webhookd-Entity"), r.Header.Get("Webhookd-Event-Id")
		seq, _ := strconv.Atoi(r.Header.Get("Webhookd-Sequence"))
		s.mu.Lock()
		s.inFlight[entity]++
		s.mostPerEntity = max(s.mostPerEntity, s.inFlight[entity])
		s.total++
		s.mostAll = max(s.mostAll, s.total)
		s.tries[id]++
		code := s.answer(id, s.tries[id])
		s.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		s.mu.Lock()
		s.inFlight[entity]--
		s.total--
		if code < 300 {
			s.order[entity] = append(s.order[entity], id)
			s.sequences[entity] = append(s.sequences[entity], seq)
		}
		s.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *entitySink) delivered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, ids := range s.order {
		n += len(ids)
	}
	return n
}

// sendEntities sends perEntity events for each of entities, each
// entity's in order from its own goroutine (all entities at once), and
// returns each entity's ids in the order they were recorded.
func sendEntities(t *testing.T, p *pipelinetest.Pipeline, prefix string, entities, perEntity int) map[string][]string {
	t.Helper()
	sent := map[string][]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for e := range entities {
		entity := fmt.Sprintf("cus_%s%d", prefix, e)
		wg.Go(func() {
			for i := range perEntity {
				id := fmt.Sprintf("evt_%s%d_%d", prefix, e, i)
				body := fmt.Sprintf(`{"id":%q,"type":"customer.updated","data":{"object":{"customer":%q}}}`, id, entity)
				if code, b := p.Send(t, []byte(body)); code != http.StatusAccepted {
					t.Errorf("send %s: %d %s", id, code, b)
					return
				}
				mu.Lock()
				sent[entity] = append(sent[entity], id)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return sent
}

// TestFIFOPerEntity: with order mode fifo, a destination gets each
// entity's events one call at a time in the order they were recorded
// (Webhookd-Sequence 1, 2, …), entities in parallel; an event that fails
// once and is retried holds only its own entity.
func TestFIFOPerEntity(t *testing.T) {
	t.Parallel()
	sink := newEntitySink(t, func(id string, n int) int {
		if strings.HasSuffix(id, "_3") && n == 1 { // every entity's 4th event fails once
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	p := pipelinetest.Start(t, pipelinetest.Options{Destinations: map[string]string{"ledger": sink.URL},
		OrderEntity: "json:data.object.customer", OrderMode: "fifo"})
	const entities, perEntity = 6, 8
	sent := sendEntities(t, p, "a", entities, perEntity)
	pipelinetest.Eventually(t, 60*time.Second, "every event delivered", func() bool { return sink.delivered() == entities*perEntity })

	sink.mu.Lock()
	defer sink.mu.Unlock()
	for entity, ids := range sent {
		if !slices.Equal(sink.order[entity], ids) {
			t.Errorf("%s delivered as %v, recorded as %v", entity, sink.order[entity], ids)
		}
		want := make([]int, perEntity)
		for i := range want {
			want[i] = i + 1
		}
		if !slices.Equal(sink.sequences[entity], want) {
			t.Errorf("%s's Webhookd-Sequence %v, want %v", entity, sink.sequences[entity], want)
		}
	}
	if sink.mostPerEntity != 1 {
		t.Errorf("an entity had %d calls in flight at once, want 1", sink.mostPerEntity)
	}
	if sink.mostAll < 2 {
		t.Errorf("at most %d calls in flight overall: entities were not delivered in parallel", sink.mostAll)
	}
	if n := p.Schema.Int(t, `SELECT count(*) FROM delivery_attempts WHERE succeeded GROUP BY key ORDER BY 1 DESC LIMIT 1`); n != 1 {
		t.Errorf("a key was delivered %d times", n)
	}
}

// TestFIFOHoldOnFailure: with on_failure hold, an event the destination
// refuses keeps its entity's later events waiting, shown held behind it,
// while other entities go on; replaying it once the destination takes it
// lets the entity go on, in order.
func TestFIFOHoldOnFailure(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	refuse := true
	sink := newEntitySink(t, func(id string, _ int) int {
		mu.Lock()
		defer mu.Unlock()
		if id == "evt_b0_1" && refuse {
			return http.StatusBadRequest
		}
		return http.StatusOK
	})
	p := pipelinetest.Start(t, pipelinetest.Options{Destinations: map[string]string{"ledger": sink.URL},
		OrderEntity: "json:data.object.customer", OrderMode: "fifo", OrderOnFailure: "hold"})
	sent := sendEntities(t, p, "b", 3, 4)
	// cus_b0: evt_b0_0 delivered, evt_b0_1 failed; the other two entities
	// complete.
	// evt_b0_1 may first wait for evt_b0_0 to settle (held, not an
	// attempt): the entity is held behind it only once it was refused.
	pipelinetest.Eventually(t, 30*time.Second, "the other entities delivered, evt_b0_1 refused", func() bool {
		return sink.delivered() == 1+4+4 &&
			p.Schema.Int(t, `SELECT count(*) FROM delivery_attempts WHERE key LIKE '%:evt_b0_1' AND status_code = 400`) > 0
	})
	time.Sleep(time.Second)
	if got := sink.delivered(); got != 9 {
		t.Fatalf("%d delivered, want 9 (cus_b0 held behind its failed event)", got)
	}
	var d dedupe.EventDetail
	heldBehind := func() bool {
		var err error
		if d, err = p.Store.GetEvent(t.Context(), pipelinetest.Source, "evt_b0_2", dedupe.DestinationView{}); err != nil {
			t.Fatal(err)
		}
		return len(d.Runs) == 1 && d.Runs[0].Shown == dedupe.ShownHeld && d.Runs[0].HoldReason == "order: waiting behind evt_b0_1"
	}
	// Polled briefly: a held run is claimed again every 250 ms.
	for deadline := time.Now().Add(3 * time.Second); !heldBehind() && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if !heldBehind() {
		t.Errorf("evt_b0_2's run %+v, want held, order: waiting behind evt_b0_1", d.Runs)
	}

	mu.Lock()
	refuse = false
	mu.Unlock()
	r := jobs.NewReplayer(p.Store, p.Enqueuer, p.Routes, jobs.ReplayerConfig{})
	if _, err := r.Replay(t.Context(), jobs.ReplayRequest{Source: pipelinetest.Source, EventID: "evt_b0_1"}); err != nil {
		t.Fatal(err)
	}
	pipelinetest.Eventually(t, 30*time.Second, "cus_b0 delivered after the replay", func() bool { return sink.delivered() == 12 })
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if !slices.Equal(sink.order["cus_b0"], sent["cus_b0"]) {
		t.Errorf("cus_b0 delivered as %v, recorded as %v", sink.order["cus_b0"], sent["cus_b0"])
	}
}

// TestFIFOSkip: with on_failure hold, an event whose run is dead holds
// its entity's later events and no other entity's; an operator's skip
// (POST /admin/events/:source/:id/skip) is recorded on the run and lets
// the entity go on at once (its next event woken, not polled), its later
// events called in order, the dead one never delivered.
func TestFIFOSkip(t *testing.T) {
	t.Parallel()
	sink := newEntitySink(t, func(id string, _ int) int {
		if id == "evt_c0_1" {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	const token = "skip-token-0123456789abcdef"
	p := pipelinetest.Start(t, pipelinetest.Options{Destinations: map[string]string{"ledger": sink.URL},
		OrderEntity: "json:data.object.customer", OrderMode: "fifo", OrderOnFailure: "hold",
		MaxAttempts: 2, AdminTokens: []string{token}})
	sent := sendEntities(t, p, "c", 3, 4)
	pipelinetest.Eventually(t, 30*time.Second, "the other entities delivered, evt_c0_1 dead", func() bool {
		return sink.delivered() == 1+4+4 &&
			p.Schema.Int(t, `SELECT count(*) FROM job_runs WHERE external_id = 'evt_c0_1' AND status = 'dead'`) == 1
	})
	time.Sleep(time.Second)
	if got := sink.delivered(); got != 9 {
		t.Fatalf("%d delivered, want 9 (cus_c0 held behind its dead event)", got)
	}
	for _, id := range []string{"evt_c0_2", "evt_c0_3"} {
		var d dedupe.EventDetail
		heldBehind := func() bool {
			var err error
			if d, err = p.Store.GetEvent(t.Context(), pipelinetest.Source, id, dedupe.DestinationView{}); err != nil {
				t.Fatal(err)
			}
			return len(d.Runs) == 1 && d.Runs[0].Shown == dedupe.ShownHeld && d.Runs[0].HoldReason == "order: waiting behind evt_c0_1"
		}
		// Polled briefly: a held run is claimed again every 250 ms.
		for deadline := time.Now().Add(3 * time.Second); !heldBehind() && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
		if !heldBehind() {
			t.Errorf("%s's run %+v, want held, order: waiting behind evt_c0_1", id, d.Runs)
		}
	}

	post := func(path, body string) (int, string) {
		h := http.Header{"Authorization": {"Bearer " + token}}
		code, b := p.Post(t, path, h, []byte(body))
		return code, string(b)
	}
	get := func(path string) string {
		req, _ := http.NewRequest(http.MethodGet, p.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		if strings.Contains(path, "/view/") {
			req.Header.Set("Accept", "text/html")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	// A held run is claimed again every 250 ms, and is not held for the
	// few milliseconds of its check: the view is polled briefly.
	var held admin.HeldEntitiesJSON
	var page string
	shown := func() bool {
		if err := json.Unmarshal([]byte(get("/admin/entities?state=held")), &held); err != nil {
			t.Fatal(err)
		}
		page = get("/admin/view/destinations")
		return len(held.Entities) == 1 && held.Entities[0].Entity == "cus_c0" && held.Entities[0].Destination == "ledger" &&
			held.Entities[0].Behind == "evt_c0_1" && held.Entities[0].BehindStatus == dedupe.StatusDead &&
			held.Entities[0].Waiting == 2 && time.Since(held.Entities[0].Since) < time.Minute &&
			strings.Contains(page, "cus_c0") && strings.Contains(page, "evt_c0_1")
	}
	for deadline := time.Now().Add(3 * time.Second); !shown() && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if !shown() {
		t.Errorf("held entities %+v, want cus_c0 on ledger behind evt_c0_1 (dead), 2 waiting, also on the page:\n%s", held.Entities, page)
	}
	// The metrics: the runs waiting for order and the oldest wait; an
	// event without the entity field is counted unordered.
	metric := func(name string) float64 {
		resp, err := http.Get(p.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
				f, _ := strconv.ParseFloat(v, 64)
				return f
			}
		}
		t.Fatalf("no %s in /metrics", name)
		return 0
	}
	const waitingSeries = `webhookd_order_waiting{destination="ledger",source="stripe"}`
	const oldestSeries = `webhookd_order_oldest_wait_seconds{destination="ledger",source="stripe"}`
	pipelinetest.Eventually(t, 5*time.Second, "the order metrics", func() bool {
		return metric(waitingSeries) == 2 && metric(oldestSeries) > 0.5
	})
	if code, b := p.Send(t, []byte(`{"id":"evt_c_none","type":"customer.updated","data":{"object":{}}}`)); code != http.StatusAccepted {
		t.Fatalf("send: %d %s", code, b)
	}
	if n := metric(`webhookd_unordered_events_total{source="stripe"}`); n != 1 {
		t.Errorf("webhookd_unordered_events_total %v, want 1", n)
	}
	if code, b := post("/admin/events/stripe/evt_c0_1/skip", `{"destination":"ledger","by":"ops"}`); code != http.StatusBadRequest {
		t.Errorf("a skip without a reason answered %d %s, want 400", code, b)
	}
	if code, b := post("/admin/events/stripe/evt_c1_0/skip", `{"destination":"ledger","reason":"x"}`); code != http.StatusConflict {
		t.Errorf("a skip of a done run answered %d %s, want 409", code, b)
	}
	skipped := time.Now()
	code, b := post("/admin/events/stripe/evt_c0_1/skip", `{"destination":"ledger","by":"ops","reason":"customer deleted upstream"}`)
	if code != http.StatusOK || !strings.Contains(b, `"action":"skipped"`) {
		t.Fatalf("skip answered %d %s, want 200 skipped", code, b)
	}
	pipelinetest.Eventually(t, 30*time.Second, "cus_c0's next event delivered", func() bool { return sink.delivered() == 11 })
	// Woken by the skip (about 0.1 s here, 1.07 s once while the
	// package's other tests loaded both cores under -race), not at its
	// next poll (up to fifoPoll, 2 s, after it).
	if d := time.Since(skipped); d > 1500*time.Millisecond {
		t.Errorf("cus_c0's next event delivered %s after the skip, want it woken by the skip", d)
	}
	pipelinetest.Eventually(t, 30*time.Second, "cus_c0 delivered past the skipped event", func() bool { return sink.delivered() == 12 })
	pipelinetest.Eventually(t, 5*time.Second, "the order metrics at zero", func() bool {
		return metric(waitingSeries) == 0 && metric(oldestSeries) == 0
	})
	time.Sleep(500 * time.Millisecond)
	if err := json.Unmarshal([]byte(get("/admin/entities")), &held); err != nil || len(held.Entities) != 0 {
		t.Errorf("held entities after the skip: %+v (%v), want none", held.Entities, err)
	}

	sink.mu.Lock()
	got := slices.Clone(sink.order["cus_c0"])
	sink.mu.Unlock()
	if want := []string{sent["cus_c0"][0], sent["cus_c0"][2], sent["cus_c0"][3]}; !slices.Equal(got, want) {
		t.Errorf("cus_c0 delivered as %v, want %v", got, want)
	}
	if n := p.Schema.Int(t, `SELECT count(*) FROM job_runs WHERE external_id = 'evt_c0_1' AND status = 'dead'
		AND skipped_by = 'ops' AND skip_reason = 'customer deleted upstream' AND skipped_at IS NOT NULL`); n != 1 {
		t.Errorf("the skip is not recorded on evt_c0_1's run (%d rows)", n)
	}
	if n := p.Schema.Int(t, `SELECT count(*) FROM delivery_attempts WHERE key LIKE '%evt_c0_1' AND succeeded`); n != 0 {
		t.Errorf("the skipped event was delivered %d times", n)
	}
}

// TestFIFOReorderWindow: with reorder_window 2s, versions 2 then 1 of one
// entity sent 300 ms apart are called 1 then 2 (version 2 waited for
// version 1); a version arriving after its successor was called is
// skipped_stale and never called.
func TestFIFOReorderWindow(t *testing.T) {
	t.Parallel()
	sink := newEntitySink(t, func(string, int) int { return http.StatusOK })
	p := pipelinetest.Start(t, pipelinetest.Options{Destinations: map[string]string{"ledger": sink.URL},
		OrderEntity: "json:data.object.customer", OrderVersion: "json:version", OrderMode: "fifo",
		ReorderWindow: 2 * time.Second})
	send := func(id string, version int) {
		body := fmt.Sprintf(`{"id":%q,"type":"customer.updated","version":%d,"data":{"object":{"customer":"cus_r"}}}`, id, version)
		if code, b := p.Send(t, []byte(body)); code != http.StatusAccepted {
			t.Fatalf("send %s: %d %s", id, code, b)
		}
	}
	start := time.Now()
	send("evt_r_v2", 2)
	time.Sleep(300 * time.Millisecond)
	send("evt_r_v1", 1)
	pipelinetest.Eventually(t, 30*time.Second, "both versions delivered", func() bool { return sink.delivered() == 2 })
	if d := time.Since(start); d < 2*time.Second {
		t.Errorf("both delivered %s after the first was sent, within the 2s window", d)
	}
	sink.mu.Lock()
	got, seqs := slices.Clone(sink.order["cus_r"]), slices.Clone(sink.sequences["cus_r"])
	sink.mu.Unlock()
	if want := []string{"evt_r_v1", "evt_r_v2"}; !slices.Equal(got, want) {
		t.Errorf("called %v, want %v (version order)", got, want)
	}
	if want := []int{1, 2}; !slices.Equal(seqs, want) {
		t.Errorf("Webhookd-Sequence %v, want %v", seqs, want)
	}

	send("evt_r_v0", 0) // older than what was called
	pipelinetest.Eventually(t, 30*time.Second, "the late version settled", func() bool {
		return p.Schema.Int(t, `SELECT count(*) FROM job_runs WHERE external_id = 'evt_r_v0' AND status = 'skipped_stale'`) == 1
	})
	if n := sink.delivered(); n != 2 {
		t.Errorf("%d delivered, want 2: the late version was called", n)
	}
	if n := p.Schema.Int(t, `SELECT count(*) FROM delivery_attempts WHERE key LIKE '%evt_r_v0'`); n != 0 {
		t.Errorf("the late version has %d calls", n)
	}
}
