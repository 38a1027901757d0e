package dedupe_test

import (
	"testing"
	"time"
)

func TestOverdueRetries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, `INSERT INTO job_runs (key, source, external_id, destination, status, permanent, max_attempts, started_at, created_at) VALUES
        ('src:dst:lost', 'src', 'lost', 'dst', 'failed', false, 5, now() - interval '2 hours', now() - interval '3 hours'),
        ('src:dst:replayed', 'src', 'replayed', 'dst', 'failed', false, 5, NULL, now() - interval '2 hours'),
        ('src:dst:backing_off', 'src', 'backing_off', 'dst', 'failed', false, 5, now() - interval '5 minutes', now() - interval '3 hours'),
        ('src:dst:refused', 'src', 'refused', 'dst', 'failed', true, 5, now() - interval '2 hours', now() - interval '3 hours'),
        ('src:dst:dead', 'src', 'dead', 'dst', 'dead', false, 5, now() - interval '2 hours', now() - interval '3 hours')`)
	runs, err := b.store.OverdueRetries(testCtx(t), time.Hour, 10)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, r := range runs {
		got[r.Key] = true
		if r.Source != "src" || r.Destination != "dst" || r.Generation != 1 {
			t.Errorf("run %+v lacks its names", r)
		}
	}
	if len(got) != 2 || !got["src:dst:lost"] || !got["src:dst:replayed"] {
		t.Fatalf("overdue %v, want lost and replayed only", got)
	}
}
