package proctest

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the master name the test's sentinel monitors.
const SentinelMaster = "webhookd-test"

// RedisSentinel is a test-owned Redis master, a replica of it, and one
// sentinel (quorum 1) that promotes the replica when the master has not
// answered for a second.
type RedisSentinel struct {
	// Master is the monitored master's name.
	Master string
	// SentinelAddr is the sentinel's host:port.
	SentinelAddr string
	// MasterAddr and ReplicaAddr are the data nodes' host:port as started.
	MasterAddr, ReplicaAddr string

	master, replica, sentinel *Process
}

// StartRedisSentinel starts a master, a replica that has synced with it,
// and a sentinel monitoring them; all are killed when the test ends. The
// sentinel runs from redis-sentinel when installed, else as
// redis-server --sentinel (the same program).
func StartRedisSentinel(tb testing.TB) *RedisSentinel {
	tb.Helper()
	bin := lookRedis(tb, "redis-server")
	dir := tb.TempDir()
	mp, rp, sp := FreePort(tb), FreePort(tb), FreePort(tb)
	s := &RedisSentinel{
		Master:       SentinelMaster,
		MasterAddr:   "127.0.0.1:" + strconv.Itoa(mp),
		ReplicaAddr:  "127.0.0.1:" + strconv.Itoa(rp),
		SentinelAddr: "127.0.0.1:" + strconv.Itoa(sp),
	}
	data := []string{"--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", dir}
	s.master = StartProcess(tb, "redis-master", bin, append([]string{"--port", strconv.Itoa(mp)}, data...))
	waitRedis(tb, s.MasterAddr, nil)
	s.replica = StartProcess(tb, "redis-replica", bin, append([]string{"--port", strconv.Itoa(rp), "--replicaof", "127.0.0.1", strconv.Itoa(mp)}, data...))
	waitRedis(tb, s.ReplicaAddr, nil)
	waitReplicaSynced(tb, s.ReplicaAddr)

	conf := filepath.Join(dir, "sentinel.conf")
	writeFile(tb, conf, fmt.Sprintf(`port %d
bind 127.0.0.1
dir %s
sentinel monitor %s 127.0.0.1 %d 1
sentinel down-after-milliseconds %s 1000
sentinel failover-timeout %s 10000
sentinel parallel-syncs %s 1
`, sp, dir, s.Master, mp, s.Master, s.Master, s.Master))
	if sbin, err := exec.LookPath("redis-sentinel"); err == nil {
		s.sentinel = StartProcess(tb, "redis-sentinel", sbin, []string{conf})
	} else {
		s.sentinel = StartProcess(tb, "redis-sentinel", bin, []string{conf, "--sentinel"})
	}
	waitRedis(tb, s.SentinelAddr, nil)
	// Wait until the sentinel has found the replica: it can only promote
	// one it knows.
	sent := redis.NewSentinelClient(&redis.Options{Addr: s.SentinelAddr})
	defer sent.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		replicas, err := sent.Replicas(context.Background(), s.Master).Result()
		if err == nil && len(replicas) > 0 {
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("sentinel did not find the replica: %v %v", replicas, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return s
}

// KillMaster SIGKILLs the master.
func (s *RedisSentinel) KillMaster() { s.master.Kill() }

// CurrentMaster returns the master's address as the sentinel says now.
func (s *RedisSentinel) CurrentMaster(ctx context.Context) (string, error) {
	sent := redis.NewSentinelClient(&redis.Options{Addr: s.SentinelAddr})
	defer sent.Close()
	addr, err := sent.GetMasterAddrByName(ctx, s.Master).Result()
	if err != nil {
		return "", err
	}
	return addr[0] + ":" + addr[1], nil
}

// waitReplicaSynced waits until the replica's link to its master is up.
func waitReplicaSynced(tb testing.TB, addr string) {
	tb.Helper()
	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := client.Info(context.Background(), "replication").Result()
		if err == nil && containsLine(info, "master_link_status:up") {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("replica %s did not sync: %v\n%s", addr, err, info)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
