package migrations_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/url"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/webhookd/webhookd/internal/testkit/pgtest"
	"github.com/webhookd/webhookd/migrations"
)

// TestUpMultiHost: a database_url naming several hosts with
// target_session_attrs=read-write (how a primary and its standby are
// listed) migrates on the first host that takes writes; here the first
// host refuses connections. Check reads it the same way.
func TestUpMultiHost(t *testing.T) {
	t.Parallel()
	single := multiHostSchema(t)
	u, err := url.Parse(single)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	_ = l.Close() // nothing listens there now
	host := u.Host
	if u.Port() == "" {
		host += ":5432"
	}
	u.Host = dead + "," + host
	q := u.Query()
	q.Set("target_session_attrs", "read-write")
	u.RawQuery = q.Encode()
	multi := u.String()

	v, err := migrations.Up(context.Background(), multi)
	if err != nil {
		t.Fatalf("Up with %s: %v", u.Redacted(), err)
	}
	if v != migrations.Latest() {
		t.Fatalf("version %d, want %d", v, migrations.Latest())
	}
	if err := migrations.Check(context.Background(), multi); err != nil {
		t.Fatalf("Check: %v", err)
	}
	var n int
	conn, err := pgx.Connect(context.Background(), single)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM information_schema.tables
WHERE table_schema = current_schema() AND table_name IN ('events', 'job_runs')`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("events and job_runs after Up: %d found (%v)", n, err)
	}
}

// multiHostSchema creates an empty schema, dropped when the test ends,
// and returns a single-host URL into it.
func multiHostSchema(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, pgtest.BaseURL())
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	defer admin.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "mh_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), pgtest.BaseURL())
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), "DROP SCHEMA "+name+" CASCADE")
	})
	return pgtest.WithSearchPath(t, pgtest.BaseURL(), name)
}
