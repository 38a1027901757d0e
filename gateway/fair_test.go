package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/jobs"
)

// TestFairBy: a destination with concurrency 4 and fair_by json:account;
// tenant A sends 5,000 events, then tenant B sends 10. B's 10 are
// delivered before A's backlog is half done, and the destination never
// has more than 4 calls in flight.
func TestFairBy(t *testing.T) {
	t.Parallel()
	runFair(t, 5000, func(d *jobs.DestinationSpec) {
		d.Concurrency = 4
		d.FairBy = "json:account"
	})
}

// TestFairByRate: the same with rate_limit 20/s and no concurrency limit:
// tenant A sends 400 events, then tenant B 10; B's 10 are delivered
// before A's backlog is half done.
func TestFairByRate(t *testing.T) {
	t.Parallel()
	runFair(t, 400, func(d *jobs.DestinationSpec) {
		d.RateLimit = "20/s"
		d.FairBy = "json:account"
	})
}

// runFair sends flood events of tenant A, then 10 of tenant B, to a
// destination tune configures, and checks B's are delivered before half
// of A's, with some call held for a fair share.
func runFair(t *testing.T, flood int, tune func(d *jobs.DestinationSpec)) {
	var (
		mu            sync.Mutex
		done          = map[string]int{}
		inFlight, top int
	)
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct {
			Account string `json:"account"`
		}
		_ = json.NewDecoder(r.Body).Decode(&ev)
		account := ev.Account
		mu.Lock()
		inFlight++
		top = max(top, inFlight)
		mu.Unlock()
		time.Sleep(10 * time.Millisecond)
		mu.Lock()
		inFlight--
		done[account]++
		mu.Unlock()
	}))
	t.Cleanup(sink.Close)
	p := pipelinetest.Start(t, pipelinetest.Options{Sources: []pipelinetest.SourceSpec{{
		Name: pipelinetest.Source, Verify: verify.Config{Scheme: "stripe", Secrets: []string{pipelinetest.Secret}}, EventID: "json:id",
		Destinations: map[string]string{"ledger": sink.URL},
		Tune:         tune,
	}}})
	count := func(account string) int {
		mu.Lock()
		defer mu.Unlock()
		return done[account]
	}
	send := func(account string, n int) {
		var wg sync.WaitGroup
		next := make(chan int)
		for range 16 {
			wg.Go(func() {
				for i := range next {
					body := fmt.Sprintf(`{"id":"evt_%s_%05d","type":"invoice.paid","account":%q}`, account, i, account)
					if code, b := p.Send(t, []byte(body)); code != http.StatusAccepted {
						t.Errorf("send: %d %s", code, b)
					}
				}
			})
		}
		for i := range n {
			next <- i
		}
		close(next)
		wg.Wait()
	}
	const few = 10
	send("acct_a", flood)
	bSent := time.Now()
	aAtB := count("acct_a")
	send("acct_b", few)
	pipelinetest.Eventually(t, 3*time.Minute, "tenant B's events delivered", func() bool { return count("acct_b") == few })
	bWait := time.Since(bSent)
	aDone := count("acct_a")
	t.Logf("tenant B's %d delivered %s after they were sent; meanwhile tenant A went from %d to %d of %d (%.1f%%); at most %d calls in flight",
		few, bWait.Round(time.Millisecond), aAtB, aDone, flood, 100*float64(aDone)/float64(flood), top)
	if aDone >= flood/2 {
		t.Errorf("tenant A had %d of %d delivered before tenant B's %d: B waited behind A's backlog", aDone, flood, few)
	}
	resp, err := http.Get(p.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !regexp.MustCompile(`webhookd_destination_holds_total\{destination="ledger",reason="fair_share",source="stripe"\} [1-9]`).Match(metrics) {
		t.Errorf("no call was held for a fair share:\n%s", regexp.MustCompile(`(?m)^webhookd_destination_holds_total.*$`).FindAll(metrics, -1))
	}
	mu.Lock()
	defer mu.Unlock()
	if c := p.Routes[pipelinetest.Source]["ledger"].Concurrency; c > 0 && top > c {
		t.Errorf("%d calls in flight, concurrency is %d", top, p.Routes[pipelinetest.Source]["ledger"].Concurrency)
	}
}
