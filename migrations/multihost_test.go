package migrations_test

import (
	"context"
	"net"
	"net/url"
	"slices"
	"strconv"
	"testing"

	"github.com/webhookd/webhookd/migrations"
)

// TestUpMultiHost: a database_url naming several hosts with
// target_session_attrs=read-write (how a primary and its standby are
// listed) migrates on the first host that takes writes; here the first
// host refuses connections. Check reads it the same way.
func TestUpMultiHost(t *testing.T) {
	t.Parallel()
	single, admin := emptySchema(t)
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
	if got := tables(t, admin, single); !slices.Contains(got, "events") || !slices.Contains(got, "job_runs") {
		t.Fatalf("tables after Up: %v", got)
	}
}
