// Package pgtest gives each test its own migrated Postgres schema.
//
// The database is located by TEST_DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/test). A test that cannot reach it
// fails with instructions; it never skips silently.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhookd/webhookd/migrations"
)

// DefaultURL is used when TEST_DATABASE_URL is not set.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test"

// BaseURL returns TEST_DATABASE_URL or DefaultURL.
func BaseURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Schema is a fresh, migrated schema that is dropped when the test ends.
type Schema struct {
	// Name is the schema's name.
	Name string
	// URL connects with search_path set to the schema, so every process
	// given it (also a webhookd subprocess) works inside the schema only.
	URL string
	// Pool is a small pool on URL.
	Pool *pgxpool.Pool
}

// New creates a uniquely named schema, applies all migrations to it, and
// registers its removal with t.Cleanup.
func New(tb testing.TB) *Schema {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	admin, err := pgxpool.New(ctx, BaseURL())
	if err == nil {
		err = admin.Ping(ctx)
	}
	if err != nil {
		tb.Fatalf("Postgres is not reachable at %s (%v); start it with: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start", BaseURL(), err)
	}
	defer admin.Close()

	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	name := "t_" + hex.EncodeToString(suffix[:])
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		tb.Fatalf("error creating schema: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		admin, err := pgxpool.New(ctx, BaseURL())
		if err != nil {
			tb.Errorf("error dropping schema %s: %v", name, err)
			return
		}
		defer admin.Close()
		if _, err := admin.Exec(ctx, "DROP SCHEMA "+name+" CASCADE"); err != nil {
			tb.Errorf("error dropping schema %s: %v", name, err)
		}
	})

	schemaURL := WithSearchPath(tb, BaseURL(), name)
	if _, err := migrations.Up(ctx, schemaURL); err != nil {
		tb.Fatalf("error migrating schema %s: %v", name, err)
	}
	cfg, err := pgxpool.ParseConfig(schemaURL)
	if err != nil {
		tb.Fatalf("error parsing %s: %v", schemaURL, err)
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		tb.Fatalf("error opening pool: %v", err)
	}
	tb.Cleanup(pool.Close)
	return &Schema{Name: name, URL: schemaURL, Pool: pool}
}

// WithSearchPath returns rawURL with its search_path parameter set to schema.
func WithSearchPath(tb testing.TB, rawURL, schema string) string {
	tb.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		tb.Fatalf("TEST_DATABASE_URL must be a postgres:// URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// Int runs sql, which returns one integer (a count, a sum), in the schema
// and returns it; a failing query fails the test.
func (s *Schema) Int(tb testing.TB, sql string, args ...any) int {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n int
	if err := s.Pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
	return n
}
