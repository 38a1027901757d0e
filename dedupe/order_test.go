package dedupe_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dedupe"
)

func TestVersionCompare(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		givenA, givenB string
		expect         int
	}{
		// Numbers compare as numbers.
		{"9", "10", -1},
		{"10", "9", 1},
		{"1.5", "1.10", 1},
		{"1e3", "999", 1},
		{"-2", "1", -1},
		{"007", "7", 0},
		{"1700000000", "1700000001", -1},
		// RFC 3339 times compare as instants, whatever the offset.
		{"2024-01-01T10:00:00+02:00", "2024-01-01T09:00:00Z", -1},
		{"2024-01-01T09:00:00Z", "2024-01-01T11:00:00+02:00", 0},
		{"2024-01-01T09:00:00.5Z", "2024-01-01T09:00:00.25Z", 1},
		{"2024-12-31T23:59:59Z", "2025-01-01T00:00:00Z", -1},
		// Anything else, or a mix, compares byte-wise.
		{"10a", "9a", -1},
		{"b", "a", 1},
		{"abc", "abc", 0},
		{"10", "2024-01-01T00:00:00Z", -1},
		{"Z", "a", -1}, // bytes, not a collation
		{"2024-13-45T00:00:00Z", "2024-01-01T00:00:00Z", 1}, // not a valid time
	} {
		var got int
		if err := b.schema.Pool.QueryRow(testCtx(t), `SELECT webhookd_version_cmp($1, $2)`, tc.givenA, tc.givenB).Scan(&got); err != nil {
			t.Fatalf("cmp(%q, %q): %v", tc.givenA, tc.givenB, err)
		}
		if got != tc.expect {
			t.Errorf("cmp(%q, %q) = %d, want %d", tc.givenA, tc.givenB, got, tc.expect)
		}
	}
}

func TestAdvanceVersion(t *testing.T) {
	t.Parallel()

	t.Run("OlderIsStaleNewerWaitsForTheCallInFlight", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := testCtx(t)
		adv := func(version, key string) dedupe.Version {
			t.Helper()
			v, err := b.store.AdvanceVersion(ctx, dedupe.VersionRequest{Source: "src", Destination: "dst", Entity: "cus_1", Version: version, Key: key, Hold: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		if v := adv("2", "k2"); v.Outcome != dedupe.VersionFresh {
			t.Fatalf("first version: %s", v.Outcome)
		}
		if v := adv("1", "k1"); v.Outcome != dedupe.VersionStale || v.Newest != "2" {
			t.Fatalf("older version while the newer is in flight: %+v, want stale", v)
		}
		if v := adv("3", "k3"); v.Outcome != dedupe.VersionBusy || time.Until(v.BusyUntil) < 50*time.Second {
			t.Fatalf("newer version while k2 is in flight: %+v, want busy until k2's hold ends", v)
		}
		if v := adv("2", "k2"); v.Outcome != dedupe.VersionFresh {
			t.Fatalf("retry of the key in flight: %s, want fresh", v.Outcome)
		}
		if err := b.store.ReleaseVersion(ctx, dedupe.VersionRequest{Source: "src", Destination: "dst", Entity: "cus_1", Key: "k2"}); err != nil {
			t.Fatal(err)
		}
		if v := adv("3", "k3"); v.Outcome != dedupe.VersionFresh {
			t.Fatalf("newer version after release: %s, want fresh", v.Outcome)
		}
		if err := b.store.ReleaseVersion(ctx, dedupe.VersionRequest{Source: "src", Destination: "dst", Entity: "cus_1", Key: "k3"}); err != nil {
			t.Fatal(err)
		}
		if v := adv("2", "k2"); v.Outcome != dedupe.VersionStale {
			t.Fatalf("retry of k2 after k3 was forwarded: %s, want stale", v.Outcome)
		}
		// Another destination orders on its own.
		if v, err := b.store.AdvanceVersion(ctx, dedupe.VersionRequest{Source: "src", Destination: "other", Entity: "cus_1", Version: "1", Key: "k1o", Hold: time.Minute}); err != nil || v.Outcome != dedupe.VersionFresh {
			t.Fatalf("other destination: %+v %v", v, err)
		}
	})

	t.Run("HoldOfADeadWorkerPasses", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := testCtx(t)
		if v, _ := b.store.AdvanceVersion(ctx, dedupe.VersionRequest{Source: "src", Destination: "dst", Entity: "e", Version: "1", Key: "k1", Hold: 50 * time.Millisecond}); v.Outcome != dedupe.VersionFresh {
			t.Fatal(v.Outcome)
		}
		time.Sleep(100 * time.Millisecond)
		if v, _ := b.store.AdvanceVersion(ctx, dedupe.VersionRequest{Source: "src", Destination: "dst", Entity: "e", Version: "2", Key: "k2", Hold: time.Minute}); v.Outcome != dedupe.VersionFresh {
			t.Fatalf("after the dead worker's hold passed: %s, want fresh", v.Outcome)
		}
	})

	// Many versions of one entity race; whoever passes holds the entity
	// until released, so the versions that pass form an increasing
	// sequence and the newest ends up recorded.
	t.Run("RaceNeverGoesBackwards", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := testCtx(t)
		const n = 30
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			passed   []int
			inFlight int
			start    = make(chan struct{})
		)
		for i := 1; i <= n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				key := fmt.Sprintf("k%d", i)
				for {
					v, err := b.store.AdvanceVersion(ctx, dedupe.VersionRequest{Source: "src", Destination: "dst", Entity: "e", Version: fmt.Sprint(i), Key: key, Hold: time.Minute})
					if err != nil {
						t.Error(err)
						return
					}
					switch v.Outcome {
					case dedupe.VersionStale:
						return
					case dedupe.VersionBusy:
						time.Sleep(time.Millisecond)
						continue
					}
					mu.Lock()
					inFlight++
					if inFlight != 1 {
						t.Errorf("%d keys of one entity in flight at once", inFlight)
					}
					passed = append(passed, i)
					mu.Unlock()
					time.Sleep(time.Millisecond) // the destination call
					mu.Lock()
					inFlight--
					mu.Unlock()
					if err := b.store.ReleaseVersion(ctx, dedupe.VersionRequest{Source: "src", Destination: "dst", Entity: "e", Key: key}); err != nil {
						t.Error(err)
					}
					return
				}
			}()
		}
		close(start)
		wg.Wait()
		for j := 1; j < len(passed); j++ {
			if passed[j] <= passed[j-1] {
				t.Fatalf("forwarded %v: version %d after %d", passed, passed[j], passed[j-1])
			}
		}
		if passed[len(passed)-1] != n {
			t.Fatalf("forwarded %v, want the newest (%d) last", passed, n)
		}
	})
}
