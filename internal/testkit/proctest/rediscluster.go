package proctest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisCluster is a test-owned Redis Cluster of masters without
// replicas, each a redis-server on its own loopback port (and cluster
// bus port), created with redis-cli --cluster create.
type RedisCluster struct {
	// Addrs are the nodes' host:port.
	Addrs []string

	nodes []*Process
}

// StartRedisCluster starts n cluster-enabled redis-servers (at least 3,
// as redis-cli requires), joins them into one cluster covering every
// slot, and waits until every node says the cluster is ok. The nodes
// are killed when the test ends.
func StartRedisCluster(tb testing.TB, n int) *RedisCluster {
	tb.Helper()
	bin := lookRedis(tb, "redis-server")
	cli := lookRedis(tb, "redis-cli")
	dir := tb.TempDir()
	c := &RedisCluster{}
	for i := range n {
		port, bus := FreePort(tb), FreePort(tb)
		addr := "127.0.0.1:" + strconv.Itoa(port)
		c.Addrs = append(c.Addrs, addr)
		c.nodes = append(c.nodes, StartProcess(tb, fmt.Sprintf("redis-cluster-%d", i), bin, []string{
			"--port", strconv.Itoa(port), "--cluster-port", strconv.Itoa(bus), "--bind", "127.0.0.1",
			"--cluster-enabled", "yes", "--cluster-config-file", fmt.Sprintf("nodes-%d.conf", port),
			"--cluster-node-timeout", "2000", "--dir", dir,
			"--save", "", "--appendonly", "no", "--daemonize", "no",
		}))
	}
	for _, addr := range c.Addrs {
		waitRedis(tb, addr, nil)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		tb.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, addr := range c.Addrs {
		node := redis.NewClient(&redis.Options{Addr: addr})
		for {
			info, err := node.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				_ = node.Close()
				tb.Fatalf("redis cluster node %s not ok: %v %s", addr, err, info)
			}
			time.Sleep(100 * time.Millisecond)
		}
		_ = node.Close()
	}
	return c
}

// Client returns a cluster client, closed when the test ends.
func (c *RedisCluster) Client(tb testing.TB) *redis.ClusterClient {
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs})
	tb.Cleanup(func() { _ = client.Close() })
	return client
}

// lookRedis finds a Redis program or fails the test saying what to
// install.
func lookRedis(tb testing.TB, name string) string {
	tb.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		tb.Fatalf("%s is needed for this test (apt-get install redis-server redis-tools): %v", name, err)
	}
	return bin
}

// waitRedis waits up to 15s for the server at addr to answer PING; logs,
// when not nil, says what the server wrote if it never does.
func waitRedis(tb testing.TB, addr string, logs func() string) {
	tb.Helper()
	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := client.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			out := ""
			if logs != nil {
				out = logs()
			}
			tb.Fatalf("redis on %s did not answer: %v\n%s", addr, err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// writeFile writes a test-owned file or fails the test.
func writeFile(tb testing.TB, path, content string) {
	tb.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		tb.Fatalf("error writing %s: %v", path, err)
	}
}

// containsLine reports whether text (Redis INFO, lines ending in \r\n)
// has the line.
func containsLine(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}
