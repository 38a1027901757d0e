package migrations_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhookd/webhookd/internal/pgtest"
	"github.com/webhookd/webhookd/migrations"
)

// emptySchema creates a schema with no tables and returns a URL into it.
func emptySchema(t *testing.T) (string, *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	admin, err := pgxpool.New(ctx, pgtest.BaseURL())
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	t.Cleanup(admin.Close)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "m_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP SCHEMA "+name+" CASCADE") })
	return pgtest.WithSearchPath(t, pgtest.BaseURL(), name), admin
}

func tables(t *testing.T, admin *pgxpool.Pool, url string) []string {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	rows, err := pool.Query(context.Background(),
		`SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_name <> 'schema_migrations' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		_ = rows.Scan(&n)
		out = append(out, n)
	}
	return out
}

func TestUpDownUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, admin := emptySchema(t)

	v1, err := migrations.Up(ctx, url)
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	if v1 == 0 {
		t.Fatal("no migration applied")
	}
	want := tables(t, admin, url)
	for _, required := range []string{"events", "job_runs"} {
		found := false
		for _, n := range want {
			found = found || n == required
		}
		if !found {
			t.Fatalf("table %s missing after up: %v", required, want)
		}
	}
	if v, err := migrations.Down(ctx, url); err != nil || v != 0 {
		t.Fatalf("down: version %d, %v", v, err)
	}
	if left := tables(t, admin, url); len(left) != 0 {
		t.Fatalf("tables left after down: %v", left)
	}
	v2, err := migrations.Up(ctx, url)
	if err != nil || v2 != v1 {
		t.Fatalf("second up: version %d (want %d), %v", v2, v1, err)
	}
	if again := tables(t, admin, url); len(again) != len(want) {
		t.Fatalf("tables after up/down/up: %v, want %v", again, want)
	}
	// Up on a current schema changes nothing.
	if v3, err := migrations.Up(ctx, url); err != nil || v3 != v1 {
		t.Fatalf("idempotent up: version %d, %v", v3, err)
	}
}

// TestConcurrentUp starts several "replicas" at once on an empty schema:
// all succeed and agree on the version.
func TestConcurrentUp(t *testing.T) {
	t.Parallel()
	url, _ := emptySchema(t)
	const replicas = 6
	versions := make([]uint, replicas)
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			versions[i], errs[i] = migrations.Up(context.Background(), url)
		}()
	}
	wg.Wait()
	for i := range replicas {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		if versions[i] != versions[0] || versions[i] == 0 {
			t.Fatalf("versions disagree: %v", versions)
		}
	}
}

// TestRecoveryFromPostgresMigration: 0011 gives a run waiting for a try
// its retry_at (now for a retryable failure, the hold's end for a held
// run), puts back in the outbox the recent events that were handed off
// but never claimed, and leaves claimed, old and already pending events
// as they are.
func TestRecoveryFromPostgresMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, _ := emptySchema(t)
	if v, err := migrations.UpTo(ctx, url, 10); err != nil || v != 10 {
		t.Fatalf("up to 10: version %d, %v", v, err)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for _, sql := range []string{
		`INSERT INTO events (source, external_id, payload, received_at) VALUES
            ('s', 'handed_off', '{}', now() - interval '1 hour'),
            ('s', 'claimed', '{}', now() - interval '1 hour'),
            ('s', 'pending', '{}', now() - interval '1 hour'),
            ('s', 'ancient', '{}', now() - interval '30 days')`,
		`INSERT INTO event_outbox (source, external_id) VALUES ('s', 'pending')`,
		`INSERT INTO job_runs (key, source, external_id, destination, status, permanent, max_attempts, held_until) VALUES
            ('s:d:claimed', 's', 'claimed', 'd', 'done', false, 5, NULL),
            ('s:d:retry', 's', 'retry', 'd', 'failed', false, 5, NULL),
            ('s:d:refused', 's', 'refused', 'd', 'failed', true, 5, NULL),
            ('s:d:held', 's', 'held', 'd', 'running', false, 5, now() + interval '30 seconds')`,
		`INSERT INTO delivery_attempts (key, call, succeeded, duration_ms) VALUES ('s:d:claimed', 1, true, 3)`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	if v, err := migrations.UpTo(ctx, url, 11); err != nil || v != 11 {
		t.Fatalf("up: version %d, %v", v, err)
	}
	var outbox []string
	rows, _ := pool.Query(ctx, `SELECT external_id FROM event_outbox ORDER BY 1`)
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		outbox = append(outbox, id)
	}
	if fmt.Sprint(outbox) != "[handed_off pending]" {
		t.Errorf("outbox after 0011: %v, want [handed_off pending]", outbox)
	}
	var due string
	if err := pool.QueryRow(ctx, `SELECT string_agg(key || '=' || CASE
            WHEN retry_at IS NULL THEN 'none'
            WHEN retry_at = held_until THEN 'hold'
            WHEN retry_at <= now() THEN 'now' ELSE 'later' END, ' ' ORDER BY key) FROM job_runs`).Scan(&due); err != nil {
		t.Fatal(err)
	}
	if due != "s:d:claimed=none s:d:held=hold s:d:refused=none s:d:retry=now" {
		t.Errorf("retry_at after 0011: %s", due)
	}
	var state string
	if err := pool.QueryRow(ctx, `SELECT state FROM delivery_attempts`).Scan(&state); err != nil || state != "finished" {
		t.Errorf("a call logged before 0011: state %q (%v), want finished", state, err)
	}
}

// TestInjectiveJobKeysMigration: 0012 re-keys the runs of event ids that
// hold a '#' as jobs.Key now writes them ('#' doubled), with their calls
// and ordering rows, also when a run's new key is another run's old one;
// every other key stays.
func TestInjectiveJobKeysMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, _ := emptySchema(t)
	if v, err := migrations.UpTo(ctx, url, 11); err != nil || v != 11 {
		t.Fatalf("up to 11: version %d, %v", v, err)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for _, sql := range []string{
		// Under the old keys: event "X#2" and generation 2 of event "X#".
		`INSERT INTO job_runs (key, source, external_id, destination, generation, status, max_attempts) VALUES
            ('s:d:X#2', 's', 'X#2', 'd', 1, 'done', 5),
            ('s:d:X##2', 's', 'X#', 'd', 2, 'failed', 5),
            ('s:d:X', 's', 'X', 'd', 1, 'done', 5),
            ('s:d:X#3', 's', 'X', 'd', 3, 'done', 5),
            ('s:d:urn:a:1', 's', 'urn:a:1', 'd', 1, 'done', 5)`,
		`INSERT INTO delivery_attempts (key, call, succeeded, duration_ms) VALUES ('s:d:X#2', 1, true, 1), ('s:d:X##2', 1, false, 1), ('s:d:X', 1, true, 1)`,
		`INSERT INTO entity_versions (source, destination, entity, version, key, inflight_key) VALUES
            ('s', 'd', 'e1', '1', 's:d:X#2', 's:d:X##2'), ('s', 'd', 'e2', '1', 's:d:X', NULL)`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	if v, err := migrations.UpTo(ctx, url, 12); err != nil || v != 12 {
		t.Fatalf("up to 12: version %d, %v", v, err)
	}
	read := func(sql string) string {
		t.Helper()
		var s string
		if err := pool.QueryRow(ctx, sql).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if got := read(`SELECT string_agg(external_id || '/' || generation || '=' || key, ' ' ORDER BY external_id COLLATE "C", generation) FROM job_runs`); got !=
		"X/1=s:d:X X/3=s:d:X#3 X#/2=s:d:X###2 X#2/1=s:d:X##2 urn:a:1/1=s:d:urn:a:1" {
		t.Errorf("runs after 0012: %s", got)
	}
	if got := read(`SELECT string_agg(key || '=' || succeeded, ' ' ORDER BY key COLLATE "C") FROM delivery_attempts`); got != "s:d:X=true s:d:X###2=false s:d:X##2=true" {
		t.Errorf("calls after 0012: %s", got)
	}
	if got := read(`SELECT string_agg(entity || '=' || key || '/' || COALESCE(inflight_key, '-'), ' ' ORDER BY entity) FROM entity_versions`); got != "e1=s:d:X##2/s:d:X###2 e2=s:d:X/-" {
		t.Errorf("ordering rows after 0012: %s", got)
	}
}
