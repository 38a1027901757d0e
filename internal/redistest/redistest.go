// Package redistest gives each test its own Redis database number.
//
// Redis is located by TEST_REDIS_URL (default redis://127.0.0.1:6379). DB 0
// holds only the allocation leases; tests get DBs 1..15, one at a time
// each, flushed before use. Asynq's key prefix is fixed, so a DB per test
// (plus a queue name per test) is what keeps parallel tests apart.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultURL is used when TEST_REDIS_URL is not set.
const DefaultURL = "redis://127.0.0.1:6379"

// firstDB and lastDB bound the DB numbers handed out.
const (
	firstDB = 1
	lastDB  = 15
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

// New leases a free DB number for the life of the test, flushes it, and
// returns it. It waits up to a minute for a DB to free up.
func New(tb testing.TB) *DB {
	tb.Helper()
	base := os.Getenv("TEST_REDIS_URL")
	if base == "" {
		base = DefaultURL
	}
	opts, err := redis.ParseURL(base)
	if err != nil {
		tb.Fatalf("TEST_REDIS_URL: %v", err)
	}
	opts.DB = 0
	admin := redis.NewClient(opts)
	defer admin.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := admin.Ping(ctx).Err(); err != nil {
		tb.Fatalf("Redis is not reachable at %s (%v); start it with: redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save \"\" --appendonly no", base, err)
	}
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	owner := hex.EncodeToString(suffix[:])

	db := leaseDB(ctx, tb, admin, owner)
	tb.Cleanup(func() {
		admin := redis.NewClient(opts)
		defer admin.Close()
		admin.Del(context.Background(), leaseKey(db))
	})

	dbOpts := *opts
	dbOpts.DB = db
	client := redis.NewClient(&dbOpts)
	tb.Cleanup(func() { _ = client.Close() })
	if err := client.FlushDB(ctx).Err(); err != nil {
		tb.Fatalf("error flushing redis db %d: %v", db, err)
	}
	u, _ := url.Parse(base)
	u.Path = "/" + strconv.Itoa(db)
	return &DB{URL: u.String(), Client: client, Queue: "test_" + owner}
}

func leaseKey(db int) string { return fmt.Sprintf("webhookd:test:db:%d", db) }

func leaseDB(ctx context.Context, tb testing.TB, admin *redis.Client, owner string) int {
	for {
		for db := firstDB; db <= lastDB; db++ {
			ok, err := admin.SetNX(ctx, leaseKey(db), owner, 30*time.Minute).Result()
			if err != nil {
				tb.Fatalf("error leasing redis db: %v", err)
			}
			if ok {
				return db
			}
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("no free redis db for the test within the deadline")
		case <-time.After(200 * time.Millisecond):
		}
	}
}
