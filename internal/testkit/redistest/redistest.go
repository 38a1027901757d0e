// Package redistest gives each test its own Redis database.
//
// Tests write only to a Redis they started or one named for them: by
// default each test binary starts its own redis-server (Debian's
// redis-server package) on a free loopback port, without persistence and
// with 64 databases, hands one database to each test at a time, and stops
// the server when the tests end. A package whose tests use New calls Main
// from TestMain (proctest.Main does), which is what stops the server; New
// fails the test otherwise. A developer's own Redis is never touched.
//
// TEST_REDIS_URL names a Redis dedicated to tests instead (say, one that
// many test runs share): there DB 0 holds the allocation leases and tests
// get DBs 1..15, each flushed before use.
//
// Asynq's key prefix is fixed, so a database per test (plus a queue name
// per test) is what keeps parallel tests apart.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// DB is one test's Redis database.
type DB struct {
	// URL selects the database, e.g. redis://127.0.0.1:6379/7.
	URL string
	// Client is connected to the database.
	Client *redis.Client
	// Queue is a unique Asynq queue name for the test.
	Queue string
}

// inMain is set while Main runs the tests.
var inMain atomic.Bool

// Main runs the tests, then stops the redis-server they started, if any.
// Call it from TestMain: os.Exit(redistest.Main(m)).
func Main(m *testing.M) int {
	inMain.Store(true)
	defer stopServer()
	return m.Run()
}

// New gives the test a Redis database of its own for its lifetime,
// flushed, and a queue name. It waits up to a minute for a database to
// free up.
func New(tb testing.TB) *DB {
	tb.Helper()
	if !inMain.Load() {
		tb.Fatal("redistest: call redistest.Main from the package's TestMain (os.Exit(redistest.Main(m))); it stops the redis-server the tests start")
	}
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	owner := hex.EncodeToString(suffix[:])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	base := os.Getenv("TEST_REDIS_URL")
	var opts *redis.Options
	if base != "" {
		opts = leaseShared(ctx, tb, base, owner)
	} else {
		opts = leaseOwn(ctx, tb)
		base = "redis://" + opts.Addr
	}
	client := redis.NewClient(opts)
	tb.Cleanup(func() { _ = client.Close() })
	if err := client.FlushDB(ctx).Err(); err != nil {
		tb.Fatalf("error flushing redis db %d: %v", opts.DB, err)
	}
	u, _ := url.Parse(base) // parsed by redis.ParseURL already
	u.Path = "/" + strconv.Itoa(opts.DB)
	return &DB{URL: u.String(), Client: client, Queue: "test_" + owner}
}

// leaseOwn leases a database of the test binary's own redis-server,
// starting the server first if this is the first test to ask.
func leaseOwn(ctx context.Context, tb testing.TB) *redis.Options {
	tb.Helper()
	s, err := startServer()
	if err != nil {
		tb.Fatal(err)
	}
	select {
	case db := <-s.free:
		tb.Cleanup(func() { s.free <- db })
		return &redis.Options{Addr: s.addr, DB: db}
	case <-ctx.Done():
		tb.Fatalf("no free redis db for the test within a minute (%d in use)", serverDBs)
		return nil
	}
}

// Databases of a shared Redis (TEST_REDIS_URL) handed out to tests; DB 0
// holds the leases.
const (
	firstSharedDB = 1
	lastSharedDB  = 15
)

// leaseShared leases a database of the Redis at base, which the developer
// dedicated to tests, until the test ends.
func leaseShared(ctx context.Context, tb testing.TB, base, owner string) *redis.Options {
	tb.Helper()
	opts, err := redis.ParseURL(base)
	if err != nil {
		tb.Fatalf("TEST_REDIS_URL: %v", err)
	}
	opts.DB = 0
	admin := redis.NewClient(opts)
	defer admin.Close()
	if err := admin.Ping(ctx).Err(); err != nil {
		tb.Fatalf("the Redis named by TEST_REDIS_URL (%s) is not reachable: %v; unset TEST_REDIS_URL to let the tests start their own", base, err)
	}
	for {
		for db := firstSharedDB; db <= lastSharedDB; db++ {
			ok, err := admin.SetNX(ctx, leaseKey(db), owner, 30*time.Minute).Result()
			if err != nil {
				tb.Fatalf("error leasing redis db: %v", err)
			}
			if ok {
				tb.Cleanup(func() {
					admin := redis.NewClient(opts)
					defer admin.Close()
					admin.Del(context.Background(), leaseKey(db))
				})
				dbOpts := *opts
				dbOpts.DB = db
				return &dbOpts
			}
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("no free redis db for the test within a minute")
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func leaseKey(db int) string { return fmt.Sprintf("webhookd:test:db:%d", db) }
