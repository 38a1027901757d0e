package main

import (
	"fmt"
	"net"

	"github.com/webhookd/webhookd"
)

// sentinelConf is redis_sentinel: a master found through Redis Sentinel.
type sentinelConf struct {
	Master   string   `yaml:"master"`
	Addrs    []string `yaml:"addrs"`
	DB       int      `yaml:"db"`
	Password string   `yaml:"password"`
}

// clusterConf is redis_cluster: a Redis Cluster.
type clusterConf struct {
	Addrs    []string `yaml:"addrs"`
	Password string   `yaml:"password"`
}

// maxQueueShards bounds queue_shards: every worker polls every shard.
const maxQueueShards = 256

// validateRedis checks that exactly one of redis_url (or REDIS_URL),
// redis_sentinel and redis_cluster says where Redis is, that sentinel or
// cluster is complete (validate parses redis_url), and queue_shards.
func (c *config) validateRedis() error {
	var given []string
	if c.RedisURL != "" {
		given = append(given, "redis_url")
	}
	if c.RedisSentinel != nil {
		given = append(given, "redis_sentinel")
	}
	if c.RedisCluster != nil {
		given = append(given, "redis_cluster")
	}
	if len(given) > 1 {
		return c.fieldError(fmt.Sprintf("give only one of redis_url (or REDIS_URL in the environment), redis_sentinel and redis_cluster; found %v", given), given[len(given)-1])
	}
	switch {
	case c.RedisSentinel != nil:
		s := c.RedisSentinel
		if s.Master == "" {
			return c.fieldError("is required: the master's name as the sentinels know it", "redis_sentinel", "master")
		}
		if s.DB < 0 {
			return c.fieldError("must not be negative", "redis_sentinel", "db")
		}
		if err := c.validateAddrs(s.Addrs, "redis_sentinel"); err != nil {
			return err
		}
	case c.RedisCluster != nil:
		if err := c.validateAddrs(c.RedisCluster.Addrs, "redis_cluster"); err != nil {
			return err
		}
	}
	if c.QueueShards < 1 || c.QueueShards > maxQueueShards {
		return c.fieldError(fmt.Sprintf("must be between 1 and %d", maxQueueShards), "queue_shards")
	}
	return nil
}

// validateAddrs checks key.addrs: at least one host:port.
func (c *config) validateAddrs(addrs []string, key string) error {
	if len(addrs) == 0 {
		return c.fieldError("needs at least one host:port", key, "addrs")
	}
	for i, a := range addrs {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return c.fieldError(fmt.Sprintf("%q is not host:port", a), key, "addrs", i)
		}
	}
	return nil
}

// redis returns where the process finds Redis.
func (c *config) redis() webhookd.RedisConfig {
	switch {
	case c.RedisSentinel != nil:
		s := c.RedisSentinel
		return webhookd.RedisConfig{Sentinel: &webhookd.SentinelConfig{Master: s.Master, Addrs: s.Addrs, DB: s.DB, Password: s.Password}}
	case c.RedisCluster != nil:
		return webhookd.RedisConfig{Cluster: &webhookd.ClusterConfig{Addrs: c.RedisCluster.Addrs, Password: c.RedisCluster.Password}}
	}
	return webhookd.RedisConfig{URL: c.RedisURL}
}
