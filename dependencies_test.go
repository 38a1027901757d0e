package webhookd

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhookd/webhookd/internal/testkit/pgtest"
)

// TestPostgresProbeWhileThePoolIsBusy: with every pool connection taken
// by work, the pool's own ping waits past the check's deadline, and the
// probe still answers; when the probe's connection is closed under it,
// the next check connects again instead of failing.
func TestPostgresProbeWhileThePoolIsBusy(t *testing.T) {
	t.Parallel()
	schema := pgtest.New(t)
	ctx := context.Background()
	pool, err := OpenPool(ctx, schema.URL, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	probe := newPostgresProbe(pool)
	defer probe.Close(ctx)

	busy, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Release()
	check := func(f func(context.Context) error) error {
		ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		return f(ctx)
	}
	if err := check(pool.Ping); err == nil {
		t.Fatal("the pool's ping answered with its only connection taken: this test shows nothing")
	}
	for i := range 3 {
		if err := check(probe.Check); err != nil {
			t.Fatalf("check %d with the pool busy: %v", i, err)
		}
	}

	// The server closes the probe's connection (an idle timeout, a
	// failover, an operator): the next check still answers.
	conn := <-probe.turn
	probe.turn <- conn
	if conn == nil {
		t.Fatal("the probe kept no connection")
	}
	var ended bool
	if err := busy.QueryRow(ctx, "SELECT pg_terminate_backend($1)", conn.PgConn().PID()).Scan(&ended); err != nil || !ended {
		t.Fatalf("terminating the probe's backend: %v, %v", ended, err)
	}
	if err := check(probe.Check); err != nil {
		t.Fatalf("check after the server closed the probe's connection: %v", err)
	}

	// Postgres really unreachable: the check fails.
	cfg, err := pgxpool.ParseConfig("postgres://postgres@127.0.0.1:1/test?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	gone, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer gone.Close()
	if err := check(newPostgresProbe(gone).Check); err == nil {
		t.Fatal("a probe of a port where nothing listens answered")
	}
}
