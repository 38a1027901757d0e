package dedupe

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// concurrency records how many flushes run at once, at most.
type concurrency struct {
	now, max atomic.Int32
}

func (c *concurrency) enter() {
	n := c.now.Add(1)
	for m := c.max.Load(); n > m && !c.max.CompareAndSwap(m, n); m = c.max.Load() {
	}
}

func (c *concurrency) leave() { c.now.Add(-1) }

// submitAll sends n items from n goroutines, each waiting for its answer.
func submitAll(t *testing.T, g *groupCommit[int, int], n int) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if got, err := g.do(context.Background(), i); err != nil || got != i {
				t.Errorf("item %d: got %d, %v", i, got, err)
			}
		})
	}
	wg.Wait()
}

func echoFlush(c *concurrency, d time.Duration) func(context.Context, []int) ([]int, error) {
	return func(_ context.Context, reqs []int) ([]int, error) {
		c.enter()
		defer c.leave()
		time.Sleep(d)
		return reqs, nil
	}
}

// TestGroupCommitOverlapsOnlySlowStatements: with OverlapAfter, quick
// statements go out one at a time although two may run (the next batch
// grows meanwhile), and a statement that runs long gets a second beside
// it once it has run OverlapAfter, not before. Without OverlapAfter two
// run at once under the same load.
func TestGroupCommitOverlapsOnlySlowStatements(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		overlapAfter time.Duration
		want         int32
	}{
		{"quick statements one at a time", time.Hour, 1},
		{"without OverlapAfter two at a time", 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var c concurrency
			g := newGroupCommit(BatcherConfig{MaxBatch: 4, MaxInFlight: 2, OverlapAfter: tc.overlapAfter}, echoFlush(&c, 2*time.Millisecond))
			defer g.close()
			submitAll(t, g, 200)
			if m := c.max.Load(); m != tc.want {
				t.Errorf("%d statements ran at once, want %d", m, tc.want)
			}
		})
	}
	t.Run("a slow statement gets company after OverlapAfter", func(t *testing.T) {
		t.Parallel()
		const overlapAfter = 300 * time.Millisecond
		release := make(chan struct{})
		started := make(chan time.Time, 2)
		var calls atomic.Int32
		g := newGroupCommit(BatcherConfig{MaxBatch: 1, MaxInFlight: 2, OverlapAfter: overlapAfter},
			func(_ context.Context, reqs []int) ([]int, error) {
				started <- time.Now()
				if calls.Add(1) == 1 {
					<-release // the slow one
				}
				return reqs, nil
			})
		defer g.close()
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = g.do(context.Background(), 1) })
		first := <-started
		second := make(chan error, 1)
		go func() { _, err := g.do(context.Background(), 2); second <- err }()
		var next time.Time
		select {
		case next = <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("the second statement never went out beside the slow one")
		}
		if gap := next.Sub(first); gap < overlapAfter {
			t.Errorf("the second statement went out %v after the first, want at least %v", gap, overlapAfter)
		}
		if err := <-second; err != nil {
			t.Errorf("second item: %v", err)
		}
		close(release)
		wg.Wait()
	})
}
