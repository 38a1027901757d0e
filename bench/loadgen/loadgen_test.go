package loadgen

import (
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/gateway/eventid"
	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/testkit/logtest"
	"github.com/webhookd/webhookd/internal/testkit/pgtest"
	"github.com/webhookd/webhookd/internal/testkit/redistest"
)

// TestRun runs the generator briefly against real Postgres and Redis and
// checks that the run is sound: every request answered 2xx, exactly-once
// holds, and the figures are in range. It asserts nothing about speed.
func TestRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		givenNaive bool
		givenRate  float64
		givenDups  float64
		givenPre   int64
		givenNoWkr bool
	}{
		{name: "webhookd open loop with duplicates", givenRate: 100, givenDups: 0.3},
		{name: "webhookd closed loop after a preload", givenDups: 0.5, givenPre: 500},
		{name: "naive closed loop", givenNaive: true, givenDups: 0.2},
		{name: "webhookd without worker", givenNoWkr: true},
		{name: "naive without worker", givenNaive: true, givenNoWkr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			schema := pgtest.New(t)
			rdb := redistest.New(t)
			log := slog.New(slog.NewTextHandler(logtest.Writer{TB: t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
			rep, err := Run(t.Context(), Config{
				Concurrency:  4,
				Rate:         tc.givenRate,
				Duration:     2 * time.Second,
				Duplicates:   tc.givenDups,
				BodySize:     512,
				DatabaseURL:  schema.URL,
				RedisURL:     rdb.URL,
				Queue:        rdb.Queue,
				Naive:        tc.givenNaive,
				Preload:      tc.givenPre,
				NoWorker:     tc.givenNoWkr,
				DrainTimeout: time.Minute,
				Log:          log,
			})
			if err != nil {
				t.Fatal(err)
			}
			c := rep.Check
			if !c.Passed {
				t.Fatalf("exactly-once check failed: %v", c.Problems)
			}
			checkTimeline(t, rep)
			if tc.givenNoWkr {
				if rep.EndToEnd.Measured || len(c.Skipped) != 1 || c.NewRows != c.DistinctSent {
					t.Errorf("without worker: end to end %+v, skipped %v, new rows %d of %d sent",
						rep.EndToEnd, c.Skipped, c.NewRows, c.DistinctSent)
				}
				return
			}
			if len(c.Skipped) > 0 {
				t.Errorf("checks skipped in-process: %v", c.Skipped)
			}
			if rep.Requests == 0 || rep.Acks != rep.Requests || rep.TransportErrors != 0 {
				t.Errorf("requests %d, acks %d, transport errors %d (%s); want every request acknowledged",
					rep.Requests, rep.Acks, rep.TransportErrors, rep.FirstError)
			}
			if tc.givenRate > 0 {
				want := tc.givenRate * 2
				if float64(rep.Requests) < want*0.9 || float64(rep.Requests) > want+1 {
					t.Errorf("open loop sent %d requests, want about %.0f", rep.Requests, want)
				}
			}
			if got := rep.StatusCodes["202"]; got != c.DistinctAcked {
				t.Errorf("202 answers %d, distinct new ids acknowledged %d", got, c.DistinctAcked)
			}
			if tc.givenDups > 0 && rep.StatusCodes["200"] == 0 {
				t.Errorf("no duplicate answers (200) with duplicates %.1f", tc.givenDups)
			}
			if c.NewRows != c.DistinctSent || c.SinkKeys != c.NewRows {
				t.Errorf("new rows %d, distinct sent %d, sink keys %d; want all equal", c.NewRows, c.DistinctSent, c.SinkKeys)
			}
			l := rep.Latency
			if !(l.P50 > 0 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.Max) {
				t.Errorf("latency percentiles out of order: %+v", l)
			}
			e := rep.EndToEnd
			if !e.Measured || !e.Drained || e.Delivered != c.DistinctSent || e.Rate <= 0 {
				t.Errorf("end to end: %+v; want all %d delivered", e, c.DistinctSent)
			}
			// What reached the sink after sending stopped is at most
			// what was delivered, and has its CPU figures.
			if e.DrainDelivered < 0 || e.DrainDelivered > e.Delivered ||
				(e.DrainDelivered > 0 && (e.DrainCPU.MachineMicrosPerAck <= 0 || len(e.DrainCPU.Groups) == 0)) {
				t.Errorf("drain: %d delivered, cpu %+v; want the figures of what was delivered after sending", e.DrainDelivered, e.DrainCPU)
			}
			if rep.AckRate <= 0 || rep.SendSeconds < 1.9 || rep.SendSeconds > 30 {
				t.Errorf("ack rate %.1f over %.2fs", rep.AckRate, rep.SendSeconds)
			}
			if rep.CPU.MachineMicrosPerAck <= 0 || rep.CPU.ProcessMicrosPerAck < 0 || rep.PeakRSSMiB <= 0 {
				t.Errorf("cpu %+v, peak rss %.1f MiB; want positive figures", rep.CPU, rep.PeakRSSMiB)
			}
			var b testBuffer
			if err := rep.WriteText(&b); err != nil || len(b) == 0 {
				t.Errorf("WriteText: %v", err)
			}
			t.Logf("\n%s", b)
		})
	}
}

// TestRunReusesPreload runs with only repeats on a schema an earlier run
// preloaded: the kept preload is found and the repeats spread over it,
// with the delivery counts exact.
func TestRunReusesPreload(t *testing.T) {
	t.Parallel()
	schema := pgtest.New(t)
	log := slog.New(slog.NewTextHandler(logtest.Writer{TB: t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	run := func(preload int64, reuse bool) *Report {
		t.Helper()
		rdb := redistest.New(t)
		rep, err := Run(t.Context(), Config{
			Concurrency: 4, Duration: time.Second, Duplicates: 1, BodySize: 256,
			DatabaseURL: schema.URL, RedisURL: rdb.URL, Queue: rdb.Queue, Preload: preload, ReuseDatabase: reuse,
			NoWorker: true, DrainTimeout: time.Minute, Log: log,
		})
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Check.Passed {
			t.Fatalf("exactly-once check failed: %v", rep.Check.Problems)
		}
		return rep
	}
	run(777, false)
	rep := run(0, true)
	if rep.Preload != 777 {
		t.Fatalf("reused run found a preload of %d events, want 777", rep.Preload)
	}
	if rep.Check.RepeatedPreloaded < 100 {
		t.Errorf("%d distinct preloaded ids repeated, want the repeats spread over the preload", rep.Check.RepeatedPreloaded)
	}
}

// TestBook checks the id book's duplicate ratio and counting.
func TestBook(t *testing.T) {
	t.Parallel()
	b := newBook("x", 10)
	r := newTestRand()
	const n = 10000
	repeats := 0
	for range n {
		p := b.next(r, 0.25)
		if p.pre || p.n < int64(len(b.sent))-1 {
			repeats++
		}
		b.ack(p)
	}
	if share := float64(repeats) / n; share < 0.2 || share > 0.3 {
		t.Errorf("repeat share %.3f, want about 0.25", share)
	}
	var sent, acked int64
	for i := range b.sent {
		sent += int64(b.sent[i])
		acked += int64(b.acked[i])
	}
	for k, v := range b.preSent {
		sent += int64(v)
		acked += int64(b.preAcked[k])
	}
	if sent != n || acked != n {
		t.Errorf("counted %d sent, %d acked; want %d", sent, acked, n)
	}
	if got := makeBody("evt_1", 1, 1024); len(got) != 1024 {
		t.Errorf("body of %d bytes, want 1024", len(got))
	}
}

type testBuffer []byte

func (b *testBuffer) Write(p []byte) (int, error) {
	*b = append(*b, p...)
	return len(p), nil
}

func newTestRand() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }

// TestBenchSourceEveryScheme checks that the generator can sign for every
// scheme it supports: its request verifies and its event id is found.
func TestBenchSourceEveryScheme(t *testing.T) {
	t.Parallel()
	for _, scheme := range verify.Schemes {
		src, err := BenchSource(scheme)
		if slices.Contains([]string{verify.SchemeTwilio, verify.SchemeMSGraph, verify.SchemeLinear, verify.SchemeSquare, verify.SchemeMailgun, verify.SchemeAdyen,
			verify.SchemeSNS, verify.SchemeHubSpot, verify.SchemeTrello, verify.SchemeContentful, verify.SchemeMailchimp}, scheme) {
			if err == nil {
				t.Errorf("%s: BenchSource succeeded", scheme)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", scheme, err)
		}
		body := makeBody("evt_bench_1", 1, 256)
		h, _, err := verify.Sign(src.Verify, body, time.Now(), "evt_bench_1")
		if err != nil {
			t.Fatalf("%s: Sign: %v", scheme, err)
		}
		if name, ok := strings.CutPrefix(src.EventID, "header:"); ok {
			h.Set(name, "evt_bench_1")
		}
		v, err := verify.New(src.Verify)
		if err != nil {
			t.Fatalf("%s: %v", scheme, err)
		}
		if err := v.Verify(verify.Request{Method: http.MethodPost, Header: h, Body: body}, time.Now()); err != nil {
			t.Errorf("%s: Verify: %v", scheme, err)
		}
		ex, err := eventid.Parse(src.EventID)
		if err != nil {
			t.Fatalf("%s: %v", scheme, err)
		}
		if id, err := ex.Extract(h, body); err != nil || id != "evt_bench_1" {
			t.Errorf("%s: event id %q, %v", scheme, id, err)
		}
	}
}
