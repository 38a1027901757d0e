package jobs

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/testkit/redistest"
)

func TestSteeringConcurrency(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	// Two "processes" sharing one Redis.
	a, b := NewSteering(NewEnqueuer(r.Client, r.Queue, nil), nil), NewSteering(NewEnqueuer(r.Client, r.Queue, nil), nil)
	dest := mustDestination(t, DestinationSpec{Name: "d", Concurrency: 2, Circuit: circuitOff})
	ctx := context.Background()
	var (
		inFlight, most atomic.Int32
		wg             sync.WaitGroup
		held           atomic.Int32
	)
	for i := range 40 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			for {
				adm, err := s.admit(ctx, "src", dest, fmt.Sprintf("k%d", i), "")
				if err != nil {
					t.Error(err)
					return
				}
				if adm.hold > 0 {
					if adm.reason != holdConcurrency {
						t.Errorf("held for %s, want concurrency", adm.reason)
					}
					held.Add(1)
					time.Sleep(5 * time.Millisecond)
					continue
				}
				n := inFlight.Add(1)
				for {
					m := most.Load()
					if n <= m || most.CompareAndSwap(m, n) {
						break
					}
				}
				time.Sleep(3 * time.Millisecond)
				inFlight.Add(-1)
				s.release(ctx, "src", dest, adm, outcomeSuccess)
				return
			}
		})
	}
	wg.Wait()
	if most.Load() > 2 {
		t.Fatalf("%d calls in flight at once, want at most 2", most.Load())
	}
	if most.Load() < 2 || held.Load() == 0 {
		t.Fatalf("most in flight %d, holds %d: the cap was never reached", most.Load(), held.Load())
	}
}

// TestSteeringSlotOfADeadWorker: a slot taken by a worker that never gives
// it back frees when its call's timeout (plus margin) passes.
func TestSteeringSlotOfADeadWorker(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	s := NewSteering(NewEnqueuer(r.Client, r.Queue, nil), nil)
	clock := time.Now()
	s.now = func() time.Time { return clock }
	dest := mustDestination(t, DestinationSpec{Name: "d", Concurrency: 1, Timeout: time.Second, Circuit: circuitOff})
	ctx := context.Background()
	if adm, err := s.admit(ctx, "src", dest, "dead", ""); err != nil || adm.hold > 0 {
		t.Fatalf("first: %+v %v", adm, err)
	}
	if adm, _ := s.admit(ctx, "src", dest, "next", ""); adm.hold == 0 {
		t.Fatal("a second call got the only slot")
	}
	clock = clock.Add(dest.Timeout + slotMargin + time.Millisecond)
	if adm, err := s.admit(ctx, "src", dest, "next", ""); err != nil || adm.hold > 0 {
		t.Fatalf("after the dead worker's slot expired: %+v %v", adm, err)
	}
}

func TestSteeringCircuit(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	s := NewSteering(NewEnqueuer(r.Client, r.Queue, nil), nil)
	clock := time.Now()
	s.now = func() time.Time { return clock }
	dest := mustDestination(t, DestinationSpec{Name: "d", Circuit: &CircuitSpec{Failures: ptr(3), Cooldown: time.Minute}})
	ctx := context.Background()
	call := func(class string) (admission, string) {
		t.Helper()
		adm, err := s.admit(ctx, "src", dest, "k", "")
		if err != nil {
			t.Fatal(err)
		}
		if adm.hold > 0 {
			return adm, ""
		}
		return adm, s.release(ctx, "src", dest, adm, class)
	}
	// A 429 or a 4xx is no failure; two failures do not open it.
	call(outcomeOther)
	call(outcomeFailure)
	call(outcomeFailure)
	if adm, _ := call(outcomeOther); adm.hold > 0 {
		t.Fatal("held after two failures, want closed")
	}
	if _, change := call(outcomeFailure); change != "opened" {
		t.Fatalf("third failure in a row: %q, want opened", change)
	}
	if adm, _ := call(outcomeSuccess); adm.reason != holdCircuitOpen || adm.hold < time.Minute || adm.hold > time.Minute+time.Second {
		t.Fatalf("while open, the first call held: %+v, want back just after the cooldown, to probe", adm)
	}
	// The others are parked: the probe's success wakes them.
	for _, key := range []string{"k2", "k3"} {
		if adm, _ := s.admit(ctx, "src", dest, key, ""); adm.reason != holdCircuitOpen || adm.hold < 7*time.Minute {
			t.Fatalf("while open, a later call: %+v, want parked for about ten cooldowns", adm)
		}
	}
	if st, _ := s.State(ctx, "src", dest); st.State != "open" || st.ConsecutiveFailures != 3 {
		t.Fatalf("state %+v, want open after 3 failures", st)
	}
	// After the cooldown one call probes; others wait while it is out.
	clock = clock.Add(time.Minute)
	probe, err := s.admit(ctx, "src", dest, "probe", "")
	if err != nil || probe.hold > 0 || !probe.probe {
		t.Fatalf("after the cooldown: %+v %v, want one probe", probe, err)
	}
	if adm, _ := s.admit(ctx, "src", dest, "other", ""); adm.reason != holdCircuitProbe {
		t.Fatalf("while probing: %+v, want held", adm)
	}
	if change := s.release(ctx, "src", dest, probe, outcomeSuccess); change != "closed" {
		t.Fatalf("probe answered 2xx: %q, want closed", change)
	}
	if adm, _ := call(outcomeSuccess); adm.hold > 0 {
		t.Fatalf("after closing: %+v", adm)
	}
	// A failed probe keeps it open for another cooldown.
	for range 3 {
		call(outcomeFailure)
	}
	clock = clock.Add(time.Minute)
	probe, _ = s.admit(ctx, "src", dest, "probe", "")
	s.release(ctx, "src", dest, probe, outcomeFailure)
	if adm, _ := s.admit(ctx, "src", dest, "k", ""); adm.reason != holdCircuitOpen || adm.hold > time.Minute+time.Second {
		t.Fatalf("after a failed probe: %+v, want open again, the first call held back after the new cooldown", adm)
	}
	if adm, _ := s.admit(ctx, "src", dest, "k2", ""); adm.reason != holdCircuitOpen || adm.hold < 7*time.Minute {
		t.Fatalf("after a failed probe, a later call: %+v, want parked", adm)
	}
}

// TestSteeringRate: callers that keep asking as their holds end get
// through at the configured rate, all processes together, and their holds
// are spread rather than all ending at once.
func TestSteeringRate(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	a, b := NewSteering(NewEnqueuer(r.Client, r.Queue, nil), nil), NewSteering(NewEnqueuer(r.Client, r.Queue, nil), nil)
	dest := mustDestination(t, DestinationSpec{Name: "d", RateLimit: "20/s", Circuit: circuitOff})
	ctx := context.Background()
	var (
		mu    sync.Mutex
		times []time.Time
		wg    sync.WaitGroup
	)
	start := time.Now()
	for i := range 60 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			for {
				adm, err := s.admit(ctx, "src", dest, fmt.Sprintf("k%d", i), "")
				if err != nil {
					t.Error(err)
					return
				}
				if adm.hold > 0 {
					time.Sleep(adm.hold)
					continue
				}
				// The turn granted, not when the sleep for it ended: on a
				// loaded machine a sleep overshoots by tens of ms and would
				// bunch calls the limiter spaced.
				turn := time.Now().Add(adm.turnIn)
				time.Sleep(adm.turnIn) // as the handler does, after the claim
				s.endWait("src", dest.Name, adm)
				mu.Lock()
				times = append(times, turn)
				mu.Unlock()
				s.release(ctx, "src", dest, adm, outcomeSuccess)
				return
			}
		})
	}
	wg.Wait()
	// 60 calls at 20/s, each its own turn: at least 59 intervals.
	if took := time.Since(start); took < 2900*time.Millisecond {
		t.Fatalf("60 calls took %s, want at least 2.95s at 20/s", took)
	}
	// No second holds more than the rate and one (the turns are read
	// when admit returns, so a little noise).
	slices.SortFunc(times, func(x, y time.Time) int { return x.Compare(y) })
	for i := range times {
		n := 0
		for _, tm := range times[i:] {
			if tm.Sub(times[i]) <= time.Second {
				n++
			}
		}
		if n > 22 {
			t.Fatalf("%d calls within a second, want at most 21", n)
		}
	}
}

func TestSteeringPaused(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	paused := true
	s := NewSteering(NewEnqueuer(r.Client, r.Queue, nil), func(source, destination string) bool { return paused && destination == "d" })
	dest := mustDestination(t, DestinationSpec{Name: "d"})
	adm, err := s.admit(context.Background(), "src", dest, "k", "")
	if err != nil || adm.reason != holdPaused || adm.hold < 20*time.Second {
		t.Fatalf("paused: %+v %v", adm, err)
	}
	paused = false
	if adm, _ := s.admit(context.Background(), "src", dest, "k", ""); adm.hold > 0 {
		t.Fatalf("resumed: %+v", adm)
	}
}

// circuitOff is a circuit spec that turns the breaker off.
var circuitOff = &CircuitSpec{Failures: ptr(0)}

func ptr[T any](v T) *T { return &v }

// mustDestination builds spec (with an unreachable URL), failing the test
// on a problem.
func mustDestination(t testing.TB, spec DestinationSpec) Destination {
	t.Helper()
	spec.URL = "http://127.0.0.1:1/"
	d, err := NewDestination(spec, DestinationOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}
