package dedupe_test

import (
	"testing"
	"time"
)

func TestDuplicateKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	insert := func(key string, succeeded bool, age time.Duration) {
		b.exec(t, `INSERT INTO delivery_attempts (key, call, status_code, succeeded, duration_ms, created_at)
            VALUES ($1, 1, 200, $2, 1, now() - $3 * interval '1 millisecond')`, key, succeeded, age.Milliseconds())
	}
	insert("twice", true, time.Hour)
	insert("twice", true, time.Minute)
	insert("once_after_failures", false, time.Hour)
	insert("once_after_failures", false, time.Hour)
	insert("once_after_failures", true, time.Minute)
	insert("twice_but_one_old", true, 8*24*time.Hour)
	insert("twice_but_one_old", true, time.Minute)
	insert("thrice", true, 3*time.Hour)
	insert("thrice", true, 2*time.Hour)
	insert("thrice", true, time.Hour)

	keys, err := b.store.DuplicateKeys(testCtx(t), 0) // default: 7 days
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, k := range keys {
		got[k.Key] = k.Successes
		if !k.First.Before(k.Last) {
			t.Errorf("%s: first %s not before last %s", k.Key, k.First, k.Last)
		}
	}
	if len(got) != 2 || got["twice"] != 2 || got["thrice"] != 3 {
		t.Fatalf("duplicates %v, want twice:2 and thrice:3", got)
	}
	if keys[0].Key != "twice" {
		t.Fatalf("order %v, want newest first", keys)
	}

	wide, err := b.store.DuplicateKeys(testCtx(t), 10*24*time.Hour)
	if err != nil || len(wide) != 3 {
		t.Fatalf("10-day window: %v, %v; want 3 keys", wide, err)
	}
}
