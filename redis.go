package webhookd

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/redis/go-redis/v9"
)

// RedisConfig says where Redis is: exactly one of URL (one server),
// Sentinel (a master found through Redis Sentinel, followed across
// failovers) or Cluster (a Redis Cluster). Asynq, the hand-off, recovery,
// the dashboard, readiness and the CLI all share the one client OpenRedis
// builds from it.
type RedisConfig struct {
	// URL is a redis:// or rediss:// URL of one server.
	URL string
	// Sentinel finds the master through Redis Sentinel.
	Sentinel *SentinelConfig
	// Cluster connects to a Redis Cluster.
	Cluster *ClusterConfig
}

// SentinelConfig locates a Redis master through Sentinel.
type SentinelConfig struct {
	// Master is the master's name as the sentinels know it. Required.
	Master string
	// Addrs are sentinels, host:port; at least one is required.
	Addrs []string
	// DB is the database number on the master. Defaults to 0.
	DB int
	// Password authenticates to the master and its replicas; empty for
	// none.
	Password string
}

// ClusterConfig locates a Redis Cluster.
type ClusterConfig struct {
	// Addrs are some of the cluster's nodes, host:port; the rest are
	// discovered. At least one is required.
	Addrs []string
	// Password authenticates to every node; empty for none.
	Password string
}

// Validate returns an error naming the first field that cannot work.
func (c RedisConfig) Validate() error {
	n := 0
	for _, set := range []bool{c.URL != "", c.Sentinel != nil, c.Cluster != nil} {
		if set {
			n++
		}
	}
	switch {
	case n == 0:
		return errors.New("webhookd: Redis needs one of URL, Sentinel or Cluster")
	case n > 1:
		return errors.New("webhookd: Redis takes only one of URL, Sentinel or Cluster")
	case c.URL != "":
		if _, err := redis.ParseURL(c.URL); err != nil {
			return fmt.Errorf("webhookd: Redis.URL: %w", err)
		}
	case c.Sentinel != nil:
		if c.Sentinel.Master == "" {
			return errors.New("webhookd: Redis.Sentinel.Master is required")
		}
		if c.Sentinel.DB < 0 {
			return errors.New("webhookd: Redis.Sentinel.DB must not be negative")
		}
		return validAddrs("Redis.Sentinel.Addrs", c.Sentinel.Addrs)
	case c.Cluster != nil:
		return validAddrs("Redis.Cluster.Addrs", c.Cluster.Addrs)
	}
	return nil
}

// validAddrs checks a non-empty list of host:port addresses.
func validAddrs(field string, addrs []string) error {
	if len(addrs) == 0 {
		return fmt.Errorf("webhookd: %s needs at least one host:port", field)
	}
	for _, a := range addrs {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return fmt.Errorf("webhookd: %s: %q is not host:port", field, a)
		}
	}
	return nil
}

// redisPoolSize is the connections per Redis server a process keeps: the
// relay, the reconciler, the worker's fetchers and its heartbeats share
// them.
const redisPoolSize = 64

// Every client OpenRedis builds sets ContextTimeoutEnabled, so a caller's
// deadline bounds the socket reads and writes of its commands: without
// it go-redis ignores the context's deadline and waits its ReadTimeout
// (3s) per try, and a Redis that hangs without refusing (stopped, a
// network partition) held an admin page or /readyz for as long as it
// hung. A call without a deadline still gets the ReadTimeout.

// OpenRedis returns the go-redis client that everything in a process
// shares: a Client for one server, a FailoverClient (which asks the
// sentinels for the master and follows a failover) for Sentinel, a
// ClusterClient (which routes each key to its slot's node and follows
// MOVED and ASK) for Cluster. It does not connect yet.
func OpenRedis(c RedisConfig) (redis.UniversalClient, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	switch {
	case c.Sentinel != nil:
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:    c.Sentinel.Master,
			SentinelAddrs: c.Sentinel.Addrs,
			DB:            c.Sentinel.DB,
			Password:      c.Sentinel.Password,
			PoolSize:      redisPoolSize,

			ContextTimeoutEnabled: true,
		}), nil
	case c.Cluster != nil:
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:    c.Cluster.Addrs,
			Password: c.Cluster.Password,
			PoolSize: redisPoolSize,

			ContextTimeoutEnabled: true,
		}), nil
	}
	opts, err := redis.ParseURL(c.URL)
	if err != nil {
		return nil, fmt.Errorf("error parsing redis_url: %w", err)
	}
	opts.PoolSize, opts.ContextTimeoutEnabled = redisPoolSize, true
	return redis.NewClient(opts), nil
}

// PingRedis reports whether Redis takes commands: the one server, the
// master Sentinel names, or every master of a cluster (a cluster with a
// master down cannot serve the queues on its slots).
func PingRedis(ctx context.Context, rdb redis.UniversalClient) error {
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			if err := node.Ping(ctx).Err(); err != nil {
				return fmt.Errorf("error pinging %s: %w", node.Options().Addr, err)
			}
			return nil
		})
	}
	return rdb.Ping(ctx).Err()
}
