package migrations_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
