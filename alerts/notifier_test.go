package alerts_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhookd/webhookd/alerts"
	"github.com/webhookd/webhookd/dedupe"
)

// oneNotice hands out one open notice on its first claim, then none.
type oneNotice struct{ claimed atomic.Bool }

func (o *oneNotice) ClaimIssueNotices(context.Context, time.Duration, int) ([]dedupe.IssueNotice, error) {
	if o.claimed.Swap(true) {
		return nil, nil
	}
	return []dedupe.IssueNotice{{Type: dedupe.NoticeOpened, Issue: dedupe.Issue{ID: 7, Source: "stripe", Destination: "billing", Cause: "500"}}}, nil
}

// fakeChannel fails its first failures sends, or blocks until ctx ends
// when hang is set, and records what it got.
type fakeChannel struct {
	kind     string
	failures int
	hang     bool
	mu       sync.Mutex
	tries    int
	got      []alerts.Message
}

func (f *fakeChannel) Kind() string { return f.kind }

func (f *fakeChannel) Send(ctx context.Context, m alerts.Message) error {
	f.mu.Lock()
	f.tries++
	try := f.tries
	f.mu.Unlock()
	if f.hang {
		<-ctx.Done()
		return ctx.Err()
	}
	if try <= f.failures {
		return errors.New("answered HTTP 502")
	}
	f.mu.Lock()
	f.got = append(f.got, m)
	f.mu.Unlock()
	return nil
}

func (f *fakeChannel) received() []alerts.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]alerts.Message(nil), f.got...)
}

// TestNotifierRetriesCountsAndIsolatesChannels: a channel that fails
// twice gets the message on its third try; one that always fails gives
// up after Attempts; one that hangs delays neither; each outcome is
// counted per channel kind.
func TestNotifierRetriesCountsAndIsolatesChannels(t *testing.T) {
	t.Parallel()
	flaky := &fakeChannel{kind: "slack", failures: 2}
	broken := &fakeChannel{kind: "email", failures: 1 << 30}
	hung := &fakeChannel{kind: "webhook", hang: true}
	reg := prometheus.NewRegistry()
	n := alerts.NewNotifier(&oneNotice{}, alerts.NotifierConfig{
		Channels: []alerts.Channel{hung, flaky, broken}, PublicURL: "https://w.example/",
		Attempts: 3, RetryWait: 10 * time.Millisecond, SendTimeout: time.Minute, Registerer: reg,
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { n.Run(ctx); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	counter := func(kind, outcome string) float64 {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if f.GetName() == "webhookd_alerts_sent_total" && labels["channel"] == kind && labels["outcome"] == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
		t.Fatalf("no webhookd_alerts_sent_total{channel=%q,outcome=%q}", kind, outcome)
		return 0
	}
	for counter("slack", "sent") < 1 || counter("email", "failed") < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("slack sent %v, email failed %v", counter("slack", "sent"), counter("email", "failed"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	got := flaky.received()
	if len(got) != 1 || got[0].URL != "https://w.example/admin/view/issues/7" || got[0].Type != alerts.TypeOpened || got[0].ID == "" {
		t.Fatalf("slack got %+v", got)
	}
	if broken.tries != 3 || counter("email", "sent") != 0 || counter("webhook", "sent") != 0 {
		t.Fatalf("email tried %d times; webhook sent %v", broken.tries, counter("webhook", "sent"))
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not end with a hung channel")
	}
	if counter("webhook", "failed") != 0 {
		t.Fatal("a send cut short by shutdown was counted as failed")
	}
}
