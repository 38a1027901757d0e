package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/alerts"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
)

// alertHang is how long the hung alert channel takes to answer.
const alertHang = 30 * time.Second

// TestHungAlertChannelDoesNotSlowDeliveries: with an issue open and its
// Slack channel hung (it answers after 30 s), deliveries go on at the
// rate they have without alerts. Each run sends one event the
// destination refuses (opening an issue), then measures how long 300
// events take from the first send to the last run done. Figures
// (docs/performance.md): go test -race -count=1 -run
// TestHungAlertChannelDoesNotSlowDeliveries -v ./cmd/webhookd/.
func TestHungAlertChannelDoesNotSlowDeliveries(t *testing.T) {
	var hung atomic.Int32
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hung.Add(1)
		// Read to the end, so the server notices the caller leaving.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-time.After(alertHang):
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(hang.Close)
	chs, err := alerts.NewChannels(alerts.Spec{Channels: []alerts.ChannelSpec{{Slack: &alerts.SlackSpec{WebhookURL: hang.URL}}}})
	if err != nil {
		t.Fatal(err)
	}

	const events = 300
	rate := func(name string, alertCfg alerts.NotifierConfig) float64 {
		dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.Header.Get("Webhookd-Event-Id"), "evt_fail") {
				w.WriteHeader(http.StatusInternalServerError)
			}
		}))
		t.Cleanup(dest.Close) // after the pipeline stops
		p := pipelinetest.Start(t, pipelinetest.Options{Destinations: map[string]string{"billing": dest.URL}, MaxAttempts: 1, Alerts: alertCfg})
		sendIssueEvents(t, p, "fail", 1)
		pipelinetest.Eventually(t, 10*time.Second, "the issue to open", func() bool {
			var n int
			_ = p.Schema.Pool.QueryRow(t.Context(), `SELECT count(*) FROM issues WHERE state = 'open'`).Scan(&n)
			return n == 1
		})
		if len(alertCfg.Channels) > 0 {
			pipelinetest.Eventually(t, 10*time.Second, "the alert channel to hang", func() bool { return hung.Load() > 0 })
		}
		start := time.Now()
		sendIssueEvents(t, p, "ok", events)
		pipelinetest.Eventually(t, alertHang, "every event delivered", func() bool {
			var n int
			_ = p.Schema.Pool.QueryRow(t.Context(), `SELECT count(*) FROM job_runs WHERE status = 'done'`).Scan(&n)
			return n == events
		})
		took := time.Since(start)
		r := float64(events) / took.Seconds()
		t.Logf("%s: %d events delivered in %s: %.0f events/s", name, events, took.Round(time.Millisecond), r)
		return r
	}
	without := rate("no alerts", alerts.NotifierConfig{})
	with := rate("alert channel hung", alerts.NotifierConfig{Channels: chs, SendTimeout: time.Minute})
	if hung.Load() == 0 {
		t.Fatal("the alert channel was never called")
	}
	if with < without/2 {
		t.Fatalf("with the alert channel hung: %.0f events/s; without alerts: %.0f events/s", with, without)
	}
	t.Logf("rate with a hung channel / without: %.2f", with/without)
}
