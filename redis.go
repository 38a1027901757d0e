package webhookd

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/internal/field"
)

// RedisConfig says where Redis is: exactly one of URL (one server),
// Sentinel (a master found through Redis Sentinel, followed across
// failovers) or Cluster (a Redis Cluster). Asynq, the hand-off, recovery,
// the dashboard, readiness and the CLI all share the one client OpenRedis
// builds from it. Its fields are the configuration's top-level keys.
type RedisConfig struct {
	// URL is a redis:// or rediss:// URL of one server.
	URL string `yaml:"redis_url"`
	// Sentinel finds the master through Redis Sentinel.
	Sentinel *SentinelConfig `yaml:"redis_sentinel"`
	// Cluster connects to a Redis Cluster.
	Cluster *ClusterConfig `yaml:"redis_cluster"`
}

// SentinelConfig locates a Redis master through Sentinel.
type SentinelConfig struct {
	// Master is the master's name as the sentinels know it. Required.
	Master string `yaml:"master"`
	// Addrs are sentinels, host:port; at least one is required.
	Addrs []string `yaml:"addrs"`
	// DB is the database number on the master. Defaults to 0.
	DB int `yaml:"db"`
	// Password authenticates to the master and its replicas; empty for
	// none.
	Password string `yaml:"password"`
}

// ClusterConfig locates a Redis Cluster.
type ClusterConfig struct {
	// Addrs are some of the cluster's nodes, host:port; the rest are
	// discovered. At least one is required.
	Addrs []string `yaml:"addrs"`
	// Password authenticates to every node; empty for none.
	Password string `yaml:"password"`
}

// Validate returns every problem, each a *field.Error naming its key
// (redis_url, redis_sentinel.master, redis_cluster.addrs[1]): the one
// place Redis's topology rules are stated.
func (c RedisConfig) Validate() error {
	var given []string
	for _, g := range []struct {
		key string
		set bool
	}{{"redis_url", c.URL != ""}, {"redis_sentinel", c.Sentinel != nil}, {"redis_cluster", c.Cluster != nil}} {
		if g.set {
			given = append(given, g.key)
		}
	}
	switch {
	case len(given) == 0:
		return field.Errorf("redis_url", "Redis needs one of redis_url, redis_sentinel or redis_cluster")
	case len(given) > 1:
		return field.Errorf(given[len(given)-1], "give only one of redis_url (or REDIS_URL in the environment), redis_sentinel and redis_cluster; found %v", given)
	case c.URL != "":
		if _, err := redis.ParseURL(c.URL); err != nil {
			return field.Errorf("redis_url", "must be a redis:// URL: %v", err)
		}
	case c.Sentinel != nil:
		var errs []error
		if c.Sentinel.Master == "" {
			errs = append(errs, field.Errorf("redis_sentinel.master", "is required: the master's name as the sentinels know it"))
		}
		if c.Sentinel.DB < 0 {
			errs = append(errs, field.Errorf("redis_sentinel.db", "must not be negative"))
		}
		return errors.Join(append(errs, validAddrs("redis_sentinel.addrs", c.Sentinel.Addrs))...)
	case c.Cluster != nil:
		return validAddrs("redis_cluster.addrs", c.Cluster.Addrs)
	}
	return nil
}

// validAddrs checks a non-empty list of host:port addresses.
func validAddrs(key string, addrs []string) error {
	if len(addrs) == 0 {
		return field.Errorf(key, "needs at least one host:port")
	}
	var errs []error
	for i, a := range addrs {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			errs = append(errs, field.Errorf(field.Index(key, i), "%q is not host:port", a))
		}
	}
	return errors.Join(errs...)
}

// redisPoolSize is the connections per Redis server a process keeps: the
// relay, the reconciler, the worker's fetchers and its heartbeats share
// them.
const redisPoolSize = 64

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
		}), nil
	case c.Cluster != nil:
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:    c.Cluster.Addrs,
			Password: c.Cluster.Password,
			PoolSize: redisPoolSize,
		}), nil
	}
	opts, err := redis.ParseURL(c.URL)
	if err != nil {
		return nil, fmt.Errorf("error parsing redis_url: %w", err)
	}
	opts.PoolSize = redisPoolSize
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
