package listen_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v75/github"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/testkit/pgtest"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/internal/testkit/proctest"
	"github.com/webhookd/webhookd/internal/testkit/redistest"
)

// TestListenResignsBySourceScheme: three sources sign with their
// production secrets (Stripe, GitHub, Standard Webhooks); listen
// forwards with --resign and one development secret, and the local app
// verifies each event with its provider's own library (stripe-go's
// webhook.ConstructEvent, go-github's ValidatePayloadFromBody, the
// Standard Webhooks library) and that development secret. The sender's
// signature never reaches the app (the gateway stores it masked), and
// the sender's other headers do.
func TestListenResignsBySourceScheme(t *testing.T) {
	t.Parallel()
	const dev = "whsec_ZGV2ZWxvcG1lbnQtc2lnbmluZy1zZWNyZXQ=" // a Standard Webhooks secret; Stripe and GitHub use it as given
	prod := map[string]string{
		"stripe":   "whsec_production_stripe_secret",
		"github":   "production-github-secret",
		"standard": "whsec_" + base64.StdEncoding.EncodeToString([]byte("production-standard-secret")),
	}
	var sources strings.Builder
	for _, name := range []string{"stripe", "github", "standard"} {
		fmt.Fprintf(&sources, `  - name: %s
    verify:
      scheme: %s
      secrets: [%q]
    destinations:
      - name: sink
        url: http://127.0.0.1:9/unused
`, name, name, prod[name])
	}
	schema, rdb := pgtest.New(t), redistest.New(t)
	cfg := proctest.WriteConfig(t, gatewayConfig(schema.URL, rdb.URL, rdb.Queue, sources.String()))
	gw := proctest.StartWebhookd(t, "gateway", proctest.Binary(t), "gateway", cfg)

	verified := map[string]string{} // source → what its library said
	var mu sync.Mutex
	app := startLocalApp(t, func(r *http.Request, body []byte) int {
		var err error
		switch src := r.Header.Get("Webhookd-Source"); src {
		case "stripe":
			_, err = webhook.ConstructEvent(body, r.Header.Get("Stripe-Signature"), dev)
		case "github":
			_, err = github.ValidatePayloadFromBody(r.Header.Get("Content-Type"), bytes.NewReader(body), r.Header.Get("X-Hub-Signature-256"), []byte(dev))
			if err == nil && r.Header.Get("X-GitHub-Event") != "push" {
				err = fmt.Errorf("X-GitHub-Event %q, want the sender's push", r.Header.Get("X-GitHub-Event"))
			}
		case "standard":
			var wh *standardwebhooks.Webhook
			if wh, err = standardwebhooks.NewWebhook(dev); err == nil {
				err = wh.Verify(body, r.Header)
			}
		default:
			err = fmt.Errorf("unknown source %q", src)
		}
		mu.Lock()
		defer mu.Unlock()
		verified[r.Header.Get("Webhookd-Source")] = fmt.Sprint(err)
		if err != nil {
			return http.StatusBadRequest
		}
		return http.StatusOK
	})
	l := startListen(t, "listen", gw.URL(), app.URL(), statePath(t), "--resign", dev)

	now := time.Now()
	post := func(source string, body []byte, h http.Header) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, gw.URL()+"/webhooks/"+source, bytes.NewReader(body))
		req.Header = h
		req.Header.Set("Content-Type", "application/json")
		resp, err := sendClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusAccepted {
			t.Fatalf("sending to %s: %v %v", source, resp, err)
		}
		resp.Body.Close()
	}
	stripeBody := fmt.Appendf(nil, `{"id":"evt_resign_1","object":"event","api_version":%q,"type":"invoice.paid","data":{"object":{"id":"in_1","object":"invoice"}}}`, stripe.APIVersion)
	h, _, _ := verify.Sign(verify.Config{Scheme: "stripe", Secrets: []string{prod["stripe"]}}, stripeBody, now, "")
	post("stripe", stripeBody, h)
	ghBody := []byte(`{"ref":"refs/heads/main","after":"abc"}`)
	h, _, _ = verify.Sign(verify.Config{Scheme: "github", Secrets: []string{prod["github"]}}, ghBody, now, "delivery-resign-1")
	h.Set("X-GitHub-Event", "push")
	post("github", ghBody, h)
	stdBody := []byte(`{"type":"user.created","data":{"id":"u_1"}}`)
	h, _, _ = verify.Sign(verify.Config{Scheme: "standard", Secrets: []string{prod["standard"]}}, stdBody, now, "msg_resign_1")
	post("standard", stdBody, h)

	pipelinetest.Eventually(t, 20*time.Second, "three events forwarded", func() bool { return len(app.requests()) >= 3 })
	mu.Lock()
	defer mu.Unlock()
	for _, src := range []string{"stripe", "github", "standard"} {
		if verified[src] != "<nil>" {
			t.Errorf("%s: the local app's verification with the development secret: %s", src, verified[src])
		}
	}
	for _, r := range app.requests() {
		if r.status != http.StatusOK || r.attempt != "1" || !strings.Contains(r.key, ":listen:") {
			t.Errorf("request %+v: want 200, attempt 1, a listen key", r)
		}
	}
	if strings.Contains(l.Logs(), dev) {
		t.Errorf("listen printed the development secret")
	}
}

// TestListenLosesNothing: two gateway replicas record 500 events sent
// across both, while listen (through a TCP proxy to one of them) is
// SIGKILLed twice and restarted, the proxy cuts the network once, and the
// local app is down for 5 seconds. The app gets every event, in feed
// order, answered 2xx once per key. The only repeats allowed are those a
// SIGKILL can make (one event whose answer came just before the kill and
// whose cursor was not yet written), at most one per kill, each with the
// same key and a higher Webhookd-Attempt.
func TestListenLosesNothing(t *testing.T) {
	t.Parallel()
	schema, rdb := pgtest.New(t), redistest.New(t)
	cfg := proctest.WriteConfig(t, gatewayConfig(schema.URL, rdb.URL, rdb.Queue, unsignedSource))
	bin := proctest.Binary(t)
	gws := []*proctest.Process{
		proctest.StartWebhookd(t, "gateway-1", bin, "gateway", cfg),
		proctest.StartWebhookd(t, "gateway-2", bin, "gateway", cfg),
	}
	proxy := proctest.StartProxy(t, gws[0].Addr)
	app := startLocalApp(t, nil)
	state := statePath(t)
	l := startListen(t, "listen-1", "http://"+proxy.Addr, app.URL(), state)

	const n = 500
	var (
		acked   = make(chan string, n)
		sending sync.WaitGroup
	)
	sending.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond) // 50/s: 10 s of sending
		defer tick.Stop()
		var wg sync.WaitGroup
		for i := range n {
			<-tick.C
			id := fmt.Sprintf("evt_%03d", i)
			gw := gws[i%2]
			wg.Go(func() {
				for range 100 {
					if code := send(gw.URL(), id); code == http.StatusAccepted || code == http.StatusOK {
						acked <- id
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
				t.Errorf("event %s not acknowledged", id)
			})
		}
		wg.Wait()
		close(acked)
	})

	atLeast := func(k int) {
		t.Helper()
		pipelinetest.Eventually(t, 60*time.Second, fmt.Sprintf("%d events at the local app", k), func() bool { return app.keys() >= k })
	}
	var logs []string
	atLeast(80)
	l.Kill()
	logs = append(logs, l.Logs())
	l = startListen(t, "listen-2", "http://"+proxy.Addr, app.URL(), state)
	atLeast(160)
	proxy.Cut()
	time.Sleep(2 * time.Second)
	proxy.Restore()
	atLeast(240)
	app.stop()
	time.Sleep(5 * time.Second)
	app.start()
	atLeast(320)
	l.Kill()
	logs = append(logs, l.Logs())
	l = startListen(t, "listen-3", "http://"+proxy.Addr, app.URL(), state)
	sending.Wait()
	var ids []string
	for id := range acked {
		ids = append(ids, id)
	}
	if len(ids) != n {
		t.Fatalf("%d of %d events acknowledged", len(ids), n)
	}
	atLeast(n)
	time.Sleep(500 * time.Millisecond) // a repeat would show up by now
	if err := l.Terminate(10 * time.Second); err != nil {
		t.Errorf("listen after SIGTERM: %v", err)
	}
	logs = append(logs, l.Logs())

	// Feed order: the events by (feed_xid, feed_seq).
	rows, err := schema.Pool.Query(context.Background(), `SELECT external_id FROM events ORDER BY feed_xid, feed_seq`)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		order = append(order, "test:listen:"+id)
	}
	if rows.Err() != nil || len(order) != n {
		t.Fatalf("%d events in the database (%v), want %d", len(order), rows.Err(), n)
	}

	// What the app saw: the first 2xx of each key in feed order, and
	// the repeats.
	var (
		first   []string
		seen    = map[string]bool{}
		repeats []received
	)
	for _, r := range app.requests() {
		if r.status/100 != 2 {
			continue // a request during the outage never reached the app
		}
		if seen[r.key] {
			repeats = append(repeats, r)
			continue
		}
		seen[r.key] = true
		first = append(first, r.key)
	}
	if !slices.Equal(first, order) {
		for i := range min(len(first), len(order)) {
			if first[i] != order[i] {
				t.Fatalf("event %d at the app is %s, want %s (feed order); %d keys seen of %d", i, first[i], order[i], len(first), n)
			}
		}
		t.Fatalf("the app saw %d keys, want %d", len(first), n)
	}
	if len(repeats) > 2 {
		t.Errorf("%d keys answered 2xx twice, want at most one per SIGKILL (2): %+v", len(repeats), repeats)
	}
	for _, r := range repeats {
		if a, _ := strconv.Atoi(r.attempt); a < 2 {
			t.Errorf("repeat of %s carried Webhookd-Attempt %q, want 2 or more", r.key, r.attempt)
		}
	}

	// Lag, record to local call, from listen's own lines (outside the
	// outages too: a figure of this run, not a benchmark).
	var lags []float64
	for _, out := range logs {
		for _, e := range eventLines(t, out) {
			lags = append(lags, e.LagMS)
		}
	}
	sort.Float64s(lags)
	if len(lags) > 0 {
		t.Logf("%d events, %d repeats after SIGKILL; lag during the chaos: p50 %.0f ms, p99 %.0f ms, max %.0f ms",
			n, len(repeats), lags[len(lags)/2], lags[len(lags)*99/100], lags[len(lags)-1])
	}
}

// TestListenGetsALateCommit: one gateway's record of event "late" is held
// open in its transaction (its outbox row waits on a row the test keeps
// locked) while the other gateway records later events, which commit
// first. listen forwards none of them before "late" commits, then
// "late" first: it never moves past an event that commits late. (A
// follower ordered by insert order would have read the later events,
// moved its cursor past "late" and never forwarded it.)
func TestListenGetsALateCommit(t *testing.T) {
	t.Parallel()
	schema, rdb := pgtest.New(t), redistest.New(t)
	cfg := proctest.WriteConfig(t, gatewayConfig(schema.URL, rdb.URL, rdb.Queue, unsignedSource))
	bin := proctest.Binary(t)
	gw1 := proctest.StartWebhookd(t, "gateway-1", bin, "gateway", cfg)
	gw2 := proctest.StartWebhookd(t, "gateway-2", bin, "gateway", cfg)
	app := startLocalApp(t, nil)
	startListen(t, "listen", gw2.URL(), app.URL(), statePath(t))

	ctx := context.Background()
	hold, err := schema.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback(ctx) }()
	var holder int
	if err := hold.QueryRow(ctx, `INSERT INTO event_outbox (source, external_id) VALUES ('test', 'late') RETURNING pg_backend_pid()`).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	lateCode := make(chan int, 1)
	go func() { lateCode <- send(gw1.URL(), "late") }()
	// gateway-1's statement has inserted "late" and waits on the outbox
	// row the test holds.
	pipelinetest.Eventually(t, 10*time.Second, "gateway-1's record to wait on the held row", func() bool {
		return schema.Int(t, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))`, holder) > 0
	})
	for i := range 3 {
		if code := send(gw2.URL(), fmt.Sprintf("after_%d", i)); code != http.StatusAccepted {
			t.Fatalf("after_%d: HTTP %d", i, code)
		}
	}
	if n := schema.Int(t, `SELECT count(*) FROM events WHERE external_id LIKE 'after_%'`); n != 3 {
		t.Fatalf("%d later events committed, want 3", n)
	}
	time.Sleep(time.Second) // listen polls meanwhile
	if got := app.requests(); len(got) != 0 {
		t.Fatalf("listen forwarded %s while an older record was still open", got[0].eventID)
	}
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if code := <-lateCode; code != http.StatusAccepted {
		t.Fatalf("late: HTTP %d", code)
	}
	pipelinetest.Eventually(t, 20*time.Second, "four events at the local app", func() bool { return len(app.requests()) >= 4 })
	var got []string
	for _, r := range app.requests() {
		got = append(got, r.eventID)
	}
	if len(got) != 4 || got[0] != "late" {
		t.Fatalf("the app got %v, want late first, then after_0..2", got)
	}
}

// TestListenCatchesUp measures listen: the lag from record to local call
// while it keeps up with 200 events at 50/s, and the time to forward
// 1,000 events recorded while it was stopped (what a laptop finds after
// a long disconnect), each in order and once.
func TestListenCatchesUp(t *testing.T) {
	t.Parallel()
	schema, rdb := pgtest.New(t), redistest.New(t)
	cfg := proctest.WriteConfig(t, gatewayConfig(schema.URL, rdb.URL, rdb.Queue, unsignedSource))
	gw := proctest.StartWebhookd(t, "gateway", proctest.Binary(t), "gateway", cfg)
	app := startLocalApp(t, nil)
	state := statePath(t)
	l := startListen(t, "listen-1", gw.URL(), app.URL(), state)

	tick := time.NewTicker(20 * time.Millisecond)
	for i := range 200 {
		<-tick.C
		if code := send(gw.URL(), fmt.Sprintf("live_%03d", i)); code != http.StatusAccepted {
			t.Fatalf("live_%03d: HTTP %d", i, code)
		}
	}
	tick.Stop()
	pipelinetest.Eventually(t, 30*time.Second, "200 events at the local app", func() bool { return app.keys() >= 200 })
	// listen prints an event's line once the local call has answered, a
	// moment after the app counted it.
	pipelinetest.Eventually(t, 5*time.Second, "200 event lines", func() bool { return len(eventLines(t, l.Logs())) >= 200 })
	var lags []float64
	for _, e := range eventLines(t, l.Logs()) {
		lags = append(lags, e.LagMS)
	}
	sort.Float64s(lags)
	if len(lags) != 200 {
		t.Fatalf("%d event lines, want 200", len(lags))
	}
	if err := l.Terminate(10 * time.Second); err != nil {
		t.Fatalf("listen after SIGTERM: %v", err)
	}

	// 1,000 events recorded while listen is stopped, 16 at a time.
	ids := make(chan string)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for id := range ids {
				if code := send(gw.URL(), id); code != http.StatusAccepted {
					t.Errorf("%s: HTTP %d", id, code)
				}
			}
		})
	}
	for i := range 1000 {
		ids <- fmt.Sprintf("backlog_%04d", i)
	}
	close(ids)
	wg.Wait()
	start := time.Now()
	startListen(t, "listen-2", gw.URL(), app.URL(), state)
	pipelinetest.Eventually(t, 60*time.Second, "the backlog at the local app", func() bool { return app.keys() >= 1200 })
	catchUp := time.Since(start)
	if reqs := app.requests(); len(reqs) != 1200 {
		t.Errorf("%d requests for 1,200 events, want one each", len(reqs))
	}
	t.Logf("lag at 50 events/s (record to local call): p50 %.1f ms, p99 %.1f ms, max %.1f ms; 1,000 waiting events forwarded %s after restart (%.0f events/s)",
		lags[len(lags)/2], lags[len(lags)*99/100], lags[len(lags)-1], catchUp.Round(time.Millisecond), 1000/catchUp.Seconds())
	if b, err := os.ReadFile(state); err != nil || !strings.Contains(string(b), `"cursor"`) {
		t.Errorf("state file after catching up: %s, %v", b, err)
	}
}
