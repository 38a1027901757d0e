package admin_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/jobs"
)

func TestReplayDoneAnswersStoredResultAndCallsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	key := b.send(t, "evt_done")
	b.waitState(t, "evt_done", dedupe.StatusDone)

	var res jobs.ReplayResult
	if code := b.do(t, "POST", "/admin/events/stripe/evt_done/replay", "", &res); code != http.StatusOK {
		t.Fatalf("replay of a done event: %d, want 200", code)
	}
	if len(res.Runs) != 1 || res.Runs[0].Action != jobs.ActionStoredResult || res.Enqueued {
		t.Fatalf("replay result %+v", res)
	}
	var stored struct {
		StatusCode int `json:"status_code"`
	}
	if err := json.Unmarshal(res.Runs[0].Result, &stored); err != nil || stored.StatusCode != 200 {
		t.Errorf("stored result %s", res.Runs[0].Result)
	}
	stays(t, time.Second, "destination calls", func() bool { return b.dest.calls(key) == 1 && b.dest.total() == 1 })
}

func TestReplayFailedRetriesWithTheSameKey(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	b.dest.setStatus(http.StatusBadRequest) // permanent failure: the task is archived
	key := b.send(t, "evt_fail")
	b.waitState(t, "evt_fail", dedupe.StatusFailed)
	if n := b.dest.calls(key); n != 1 {
		t.Fatalf("calls before replay: %d", n)
	}

	b.dest.setStatus(http.StatusOK)
	var res jobs.ReplayResult
	if code := b.do(t, "POST", "/admin/events/stripe/evt_fail/replay", `{"by":"dana","reason":"fixed the 400"}`, &res); code != http.StatusAccepted {
		t.Fatalf("replay of a failed event: %d, want 202 (%+v)", code, res)
	}
	if res.Runs[0].Action != jobs.ActionRequeued || res.Runs[0].Key != key {
		t.Fatalf("replay result %+v", res)
	}
	d := b.waitState(t, "evt_fail", dedupe.StatusDone)
	if n := b.dest.calls(key); n != 2 {
		t.Errorf("calls with key %s: %d, want 2 (one failed, one replayed)", key, n)
	}
	stays(t, 500*time.Millisecond, "destination calls", func() bool { return b.dest.total() == 2 })
	if len(d.Runs) != 1 || d.Runs[0].ReplayedBy != "dana" || d.Runs[0].ReplayReason != "fixed the 400" || d.Runs[0].Calls != 2 {
		t.Errorf("run after replay %+v", d.Runs)
	}
}

func TestReplayDeadRetriesWithTheSameKey(t *testing.T) {
	t.Parallel()
	b := setup(t, options{maxAttempts: 2})
	b.dest.setStatus(http.StatusInternalServerError)
	key := b.send(t, "evt_dead")
	b.waitState(t, "evt_dead", dedupe.StatusDead)
	b.dest.setStatus(http.StatusOK)
	if code := b.do(t, "POST", "/admin/events/stripe/evt_dead/replay", "", nil); code != http.StatusAccepted {
		t.Fatalf("replay of a dead event: %d, want 202", code)
	}
	b.waitState(t, "evt_dead", dedupe.StatusDone)
	if n := b.dest.calls(key); n != 3 {
		t.Errorf("calls with key %s: %d, want 3 (2 failed + 1 replayed)", key, n)
	}
}

func TestReplayForceStartsARecordedGeneration(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	key := b.send(t, "evt_force")
	b.waitState(t, "evt_force", dedupe.StatusDone)

	var res jobs.ReplayResult
	code := b.do(t, "POST", "/admin/events/stripe/evt_force/replay?force=true&destination=billing&by=erin&reason=customer+asked", "", &res)
	if code != http.StatusAccepted || res.Runs[0].Action != jobs.ActionForced || res.Runs[0].Key != key+"#2" {
		t.Fatalf("forced replay: %d %+v", code, res)
	}
	pipelinetest.Eventually(t, 20*time.Second, "the #2 call", func() bool { return b.dest.calls(key+"#2") == 1 })
	d := b.waitState(t, "evt_force", dedupe.StatusDone)
	stays(t, 500*time.Millisecond, "destination calls", func() bool { return b.dest.total() == 2 && b.dest.calls(key) == 1 })

	var gen2 *dedupe.Run
	for i := range d.Runs {
		if d.Runs[i].Generation == 2 {
			gen2 = &d.Runs[i]
		}
	}
	if gen2 == nil || gen2.Key != key+"#2" || gen2.Status != dedupe.StatusDone || gen2.ReplayedBy != "erin" || gen2.ReplayReason != "customer asked" {
		t.Fatalf("runs after forced replay: %+v", d.Runs)
	}

	// The audit line names who, why, the key and the generation.
	var audit map[string]any
	for _, l := range b.logs.Lines(t) {
		if strings.Contains(l["msg"].(string), "forced replay recorded") {
			audit = l
		}
	}
	if audit == nil {
		t.Fatal("no audit log line for the forced replay")
	}
	for k, want := range map[string]any{
		"source": "stripe", "event_id": "evt_force", "key": key + "#2", "generation": 2.0,
		"by": "erin", "reason": "customer asked", "destination": destName,
	} {
		if audit[k] != want {
			t.Errorf("audit line %s = %v, want %v (line %v)", k, audit[k], want, audit)
		}
	}
	if id, _ := audit["request_id"].(string); id == "" {
		t.Errorf("audit line has no request_id: %v", audit)
	}

	// The event shows the generation through the API too.
	var detail struct {
		Runs []struct {
			Key        string `json:"key"`
			Generation int    `json:"generation"`
			ReplayedBy string `json:"replayed_by"`
		} `json:"runs"`
	}
	if code := b.do(t, "GET", "/admin/events/stripe/evt_force", "", &detail); code != http.StatusOK || len(detail.Runs) != 2 || detail.Runs[1].ReplayedBy != "erin" {
		t.Errorf("GET event: %d %+v", code, detail)
	}
}

// TestReplayKeysCannotCollideThroughHash: an event id holding "#<n>" had
// the key of generation n of another event's forced replay, so forced
// replays of the victim failed with 500, and an event "X#2" arriving
// after a forced replay of X was acknowledged and never delivered (its
// claim found the replay's done run). Both are attacks anyone who can
// send a signed event with a chosen id can make.
func TestReplayKeysCannotCollideThroughHash(t *testing.T) {
	t.Parallel()

	t.Run("ForcedReplayOfTheVictim", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{})
		victim := b.send(t, "X")
		b.waitState(t, "X", dedupe.StatusDone)
		attacker := b.send(t, "X#2")
		b.waitState(t, "X#2", dedupe.StatusDone)

		var res jobs.ReplayResult
		code := b.do(t, "POST", "/admin/events/stripe/X/replay?force=true&destination=billing&by=erin&reason=again", "", &res)
		if code != http.StatusAccepted || len(res.Runs) != 1 || res.Runs[0].Key != victim+"#2" {
			t.Fatalf("forced replay of X: %d %+v", code, res)
		}
		pipelinetest.Eventually(t, 20*time.Second, "X's #2 call", func() bool { return b.dest.calls(victim+"#2") == 1 })
		b.waitState(t, "X", dedupe.StatusDone)
		if attacker == victim+"#2" || b.dest.calls(attacker) != 1 {
			t.Fatalf("X#2's key %q: %d calls, want its own key called once", attacker, b.dest.calls(attacker))
		}
	})

	t.Run("AnIDAfterAForcedReplayIsDelivered", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{})
		victim := b.send(t, "X")
		b.waitState(t, "X", dedupe.StatusDone)
		if code := b.do(t, "POST", "/admin/events/stripe/X/replay?force=true&destination=billing&by=erin&reason=again", "", nil); code != http.StatusAccepted {
			t.Fatalf("forced replay of X: %d", code)
		}
		pipelinetest.Eventually(t, 20*time.Second, "X's #2 call", func() bool { return b.dest.calls(victim+"#2") == 1 })

		key := b.send(t, "X#2")
		b.waitState(t, "X#2", dedupe.StatusDone)
		if b.dest.calls(key) != 1 {
			t.Fatalf("event X#2 (key %q): %d calls, want 1", key, b.dest.calls(key))
		}
		stays(t, 500*time.Millisecond, "destination calls", func() bool { return b.dest.total() == 3 })
	})
}

func TestReplayErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	for _, c := range []struct {
		path string
		want int
	}{
		{"/admin/events/stripe/evt_missing/replay", http.StatusNotFound},
		{"/admin/events/nosuch/evt_1/replay", http.StatusUnprocessableEntity},
		{"/admin/events/stripe/evt_1/replay?destination=nope", http.StatusUnprocessableEntity},
		{"/admin/events/stripe/evt_1/replay?force=maybe", http.StatusBadRequest},
	} {
		var body map[string]any
		if code := b.do(t, "POST", c.path, "", &body); code != c.want || body["error"] == nil {
			t.Errorf("POST %s: %d %v, want %d with an error", c.path, code, body, c.want)
		}
	}
}

func TestBulkReplayDryRunThenCapped(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	b.dest.setStatus(http.StatusUnprocessableEntity)
	ids := []string{"evt_b1", "evt_b2", "evt_b3"}
	for _, id := range ids {
		b.send(t, id)
	}
	for _, id := range ids {
		b.waitState(t, id, dedupe.StatusFailed)
	}
	b.send(t, "evt_other") // fails too, but is outside the time range below
	b.waitState(t, "evt_other", dedupe.StatusFailed)
	if _, err := b.p.Schema.Pool.Exec(t.Context(), `UPDATE events SET received_at = now() - interval '3 hours' WHERE external_id = 'evt_other'`); err != nil {
		t.Fatal(err)
	}
	b.dest.setStatus(http.StatusOK)
	callsBefore := b.dest.total()

	var dry jobs.BulkResult
	if code := b.do(t, "POST", "/admin/replay", `{"source":"stripe","state":"failed","since":"1h"}`, &dry); code != http.StatusOK {
		t.Fatalf("dry run: %d", code)
	}
	if !dry.DryRun || dry.Matched != 3 || dry.Selected != 3 || dry.Enqueued != 0 {
		t.Fatalf("dry run result %+v", dry)
	}
	stays(t, time.Second, "destination calls after a dry run", func() bool { return b.dest.total() == callsBefore })
	for _, id := range ids {
		b.waitState(t, id, dedupe.StatusFailed)
	}

	var first jobs.BulkResult
	if code := b.do(t, "POST", "/admin/replay", `{"state":"failed","since":"1h","dry_run":false,"limit":2,"by":"ops"}`, &first); code != http.StatusAccepted {
		t.Fatalf("bulk replay: %d %+v", code, first)
	}
	if first.DryRun || first.Matched != 3 || first.Selected != 2 || first.Enqueued != 2 || first.Next == "" {
		t.Fatalf("capped bulk replay %+v", first)
	}
	var second jobs.BulkResult
	body := `{"state":"failed","since":"1h","dry_run":false,"limit":2,"cursor":"` + first.Next + `"}`
	if code := b.do(t, "POST", "/admin/replay", body, &second); code != http.StatusAccepted || second.Enqueued != 1 || second.Next != "" {
		t.Fatalf("bulk replay, second page: %d %+v", code, second)
	}
	for _, id := range ids {
		b.waitState(t, id, dedupe.StatusDone)
	}
	if d, _ := b.p.Store.GetEvent(t.Context(), "stripe", "evt_other", dedupe.DestinationView{}); d.State != dedupe.StatusFailed {
		t.Errorf("event outside the filter was replayed: %s", d.State)
	}
	if code := b.do(t, "POST", "/admin/replay", `{"state":"bogus"}`, nil); code != http.StatusBadRequest {
		t.Errorf("unknown state: %d, want 400", code)
	}
}

// TestReplayForwardsARecordedOnlyEvent: an event imported as delivered
// elsewhere shows as recorded_only (listing filter, API, page) and is
// never called, until a replay forwards it: its first run, then done.
func TestReplayForwardsARecordedOnlyEvent(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	_, err := b.p.Store.ImportEvents(t.Context(), []dedupe.ImportedEvent{{Event: dedupe.Event{
		Source: pipelinetest.Source, ExternalID: "evt_elsewhere", ContentType: "application/json", Payload: []byte(`{"id":"evt_elsewhere"}`),
	}}}, dedupe.ImportOptions{RecordOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Events []struct {
			EventID      string `json:"event_id"`
			State        string `json:"state"`
			RecordedOnly bool   `json:"recorded_only"`
		} `json:"events"`
	}
	if code := b.do(t, "GET", "/admin/events?state=recorded_only", "", &list); code != http.StatusOK || len(list.Events) != 1 ||
		list.Events[0].EventID != "evt_elsewhere" || !list.Events[0].RecordedOnly || list.Events[0].State != dedupe.StateRecordedOnly {
		t.Fatalf("listing by state recorded_only: %d %+v", code, list)
	}
	req, _ := http.NewRequest("GET", b.srv.URL+"/admin/events/stripe/evt_elsewhere", nil)
	req.Header.Set("Authorization", "Bearer "+b.token)
	req.Header.Set("Accept", "text/html")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "imported as delivered elsewhere") || !strings.Contains(string(page), `id="event-state">recorded_only<`) {
		t.Errorf("event page of a recorded-only event:\n%s", page)
	}
	stays(t, time.Second, "destination calls", func() bool { return b.dest.total() == 0 })

	var res jobs.ReplayResult
	if code := b.do(t, "POST", "/admin/events/stripe/evt_elsewhere/replay", "", &res); code != http.StatusAccepted ||
		len(res.Runs) != 1 || res.Runs[0].Action != jobs.ActionEnqueued {
		t.Fatalf("replay of a recorded-only event: %d %+v", code, res)
	}
	b.waitState(t, "evt_elsewhere", dedupe.StatusDone)
	if n := b.dest.calls(jobs.Key(pipelinetest.Source, destName, "evt_elsewhere", 1)); n != 1 {
		t.Errorf("destination calls after the replay: %d, want 1", n)
	}
}

// TestReplayOfARecordedOnlyEventOutlivesALostTask: an event imported
// as delivered elsewhere has no outbox row; its replay records the
// destination's first run in Postgres, due now, so when the replay's
// task never reaches Redis the reconciler writes it and the event is
// delivered once.
func TestReplayOfARecordedOnlyEventOutlivesALostTask(t *testing.T) {
	t.Parallel()
	b := setup(t, options{loseRequeues: true})
	_, err := b.p.Store.ImportEvents(t.Context(), []dedupe.ImportedEvent{{Event: dedupe.Event{
		Source: pipelinetest.Source, ExternalID: "evt_lost", ContentType: "application/json", Payload: []byte(`{"id":"evt_lost"}`),
	}}}, dedupe.ImportOptions{RecordOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var res jobs.ReplayResult
	if code := b.do(t, "POST", "/admin/events/stripe/evt_lost/replay", "", &res); code != http.StatusAccepted ||
		len(res.Runs) != 1 || res.Runs[0].Action != jobs.ActionEnqueued {
		t.Fatalf("replay of a recorded-only event: %d %+v", code, res)
	}
	b.waitState(t, "evt_lost", dedupe.StatusDone)
	if n := b.dest.calls(jobs.Key(pipelinetest.Source, destName, "evt_lost", 1)); n != 1 {
		t.Errorf("destination calls: %d, want 1", n)
	}
}
