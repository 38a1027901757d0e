package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/testkit/pgtest"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/internal/testkit/proctest"
)

// recoveryTasks reads webhookd_recovery_tasks_total{action} from a
// process's /metrics.
func recoveryTasks(t *testing.T, p *proctest.Process, action string) int {
	t.Helper()
	resp, err := http.Get(p.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^webhookd_recovery_tasks_total\{action="` + action + `"\} (\d+)`).FindSubmatch(raw)
	if m == nil {
		t.Fatalf("no webhookd_recovery_tasks_total{action=%q} on /metrics", action)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// TestLossAlarmOnlyForRealLoss: the "Redis lost tasks" signal
// (webhookd_recovery_tasks_total{action="written"} and its warning) is
// kept for real loss. Importing 1,000 events and recording events while
// Redis is down are routine hand-offs by recovery, counted as
// action="handed_off"; tasks the relay enqueued and Redis then lost (a
// restart with its data gone) still raise the alarm. At addef08 every
// imported event counted as lost.
func TestLossAlarmOnlyForRealLoss(t *testing.T) {
	t.Parallel()
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	redis := proctest.StartRedis(t)
	dest := newFaultSink(t)
	cfg := proctest.WriteConfig(t, "admin_token: "+steeringToken+"\n"+faultConfig(schema.URL, redis.URL, "webhookd", dest.URL))
	serve := proctest.StartWebhookd(t, "serve", bin, "serve", cfg)

	// An import of 1,000 events: handed off by recovery, not lost.
	var export bytes.Buffer
	for i := range 1000 {
		fmt.Fprintf(&export, `{"id":"evt_imp_%04d","type":"fault.test"}`+"\n", i)
	}
	cmd := exec.Command(bin, "import", "-", "--source", "test", "--config", cfg)
	cmd.Env = append(os.Environ(), "DATABASE_URL=", "REDIS_URL=")
	cmd.Stdin = &export
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "1000 new") {
		t.Fatalf("webhookd import: %v\n%s", err, out)
	}
	pipelinetest.Eventually(t, 60*time.Second, "the 1,000 imported events delivered", func() bool {
		k, _ := dest.keys()
		return k == 1000
	})
	if n := recoveryTasks(t, serve, "written"); n != 0 {
		t.Errorf("after an import of 1,000 events: %d tasks counted as lost by Redis, want 0", n)
	}
	if n := recoveryTasks(t, serve, "handed_off"); n < 1000 {
		t.Errorf("after an import of 1,000 events: %d counted as handed off by recovery, want 1,000", n)
	}

	// Events recorded while Redis is down: routine too.
	redis.Stop()
	for i := range 20 {
		mustSend(t, serve.URL(), fmt.Sprintf("evt_down_%02d", i), http.StatusAccepted)
	}
	redis.Start()
	pipelinetest.Eventually(t, 60*time.Second, "the events recorded while Redis was down delivered", func() bool {
		k, _ := dest.keys()
		return k == 1020
	})
	if n := recoveryTasks(t, serve, "written"); n != 0 {
		t.Errorf("after a Redis outage at ingest: %d tasks counted as lost, want 0", n)
	}

	// Real loss: the relay enqueued these (a paused destination keeps
	// their tasks in Redis), then Redis restarts empty.
	admin := func(verb string) {
		req, _ := http.NewRequest(http.MethodPost, serve.URL()+"/admin/destinations/test/sink/"+verb, strings.NewReader(`{"by":"test"}`))
		req.Header.Set("Authorization", "Bearer "+steeringToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %v %v", verb, resp, err)
		}
		resp.Body.Close()
	}
	admin("pause")
	time.Sleep(2500 * time.Millisecond) // the pause reaches the worker
	for i := range 10 {
		mustSend(t, serve.URL(), fmt.Sprintf("evt_lost_%02d", i), http.StatusAccepted)
	}
	pipelinetest.Eventually(t, 20*time.Second, "the relay marks the 10 events handed off", func() bool {
		return schema.Int(t, `SELECT count(*) FROM event_outbox o JOIN event_handoffs h ON h.record_xid = o.record_xid
		                    WHERE o.external_id LIKE 'evt_lost_%'`) == 10
	})
	redis.Stop()
	redis.Start()
	admin("resume")
	pipelinetest.Eventually(t, 60*time.Second, "the lost tasks written again and delivered", func() bool {
		k, _ := dest.keys()
		return k == 1030
	})
	if n := recoveryTasks(t, serve, "written"); n < 10 {
		t.Errorf("after Redis lost 10 tasks: %d counted as lost, want at least 10", n)
	}
	if k, repeated := dest.keys(); k != 1030 || len(repeated) > 0 {
		t.Errorf("%d keys delivered, repeated %v; want 1,030, each once", k, repeated)
	}
}
