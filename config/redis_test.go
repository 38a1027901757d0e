package config

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/webhookd/webhookd"
)

// redisYAML is validConfig with its redis_url line replaced by lines.
func redisYAML(lines string) string {
	return strings.Replace(validConfig, "redis_url: redis://127.0.0.1:6379/0\n", lines, 1)
}

func TestConfigRedisLocations(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		givenYAML   string
		givenEnv    map[string]string
		expectRedis webhookd.RedisConfig
		expectShard int
	}{
		{
			name:        "redis_url",
			givenYAML:   validConfig,
			expectRedis: webhookd.RedisConfig{URL: "redis://127.0.0.1:6379/0"},
			expectShard: 1,
		},
		{
			name:        "nothing given: the local default",
			givenYAML:   redisYAML(""),
			expectRedis: webhookd.RedisConfig{URL: "redis://127.0.0.1:6379/0"},
			expectShard: 1,
		},
		{
			name:        "REDIS_URL overrides redis_url",
			givenYAML:   validConfig,
			givenEnv:    map[string]string{"REDIS_URL": "redis://cache:6379/2"},
			expectRedis: webhookd.RedisConfig{URL: "redis://cache:6379/2"},
			expectShard: 1,
		},
		{
			name:      "redis_sentinel",
			givenYAML: redisYAML("redis_sentinel:\n  master: mymaster\n  addrs: [\"s1:26379\", \"s2:26379\"]\n  db: 3\nqueue_shards: 4\n"),
			expectRedis: webhookd.RedisConfig{Sentinel: &webhookd.SentinelConfig{
				Master: "mymaster", Addrs: []string{"s1:26379", "s2:26379"}, DB: 3,
			}},
			expectShard: 4,
		},
		{
			name:        "redis_cluster",
			givenYAML:   redisYAML("redis_cluster:\n  addrs: [\"n1:7000\", \"n2:7001\", \"n3:7002\"]\nqueue_shards: 8\n"),
			expectRedis: webhookd.RedisConfig{Cluster: &webhookd.ClusterConfig{Addrs: []string{"n1:7000", "n2:7001", "n3:7002"}}},
			expectShard: 8,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := map[string]string{"STRIPE_SECRET": "whsec_x", "SIGNING": signingSecret}
			for k, v := range tc.givenEnv {
				e[k] = v
			}
			cfg, err := Parse("w.yaml", []byte(tc.givenYAML), env(e))
			if err != nil {
				t.Fatal(err)
			}
			pc := cfg.Process
			got := pc.Redis
			if got.URL != tc.expectRedis.URL || (got.Sentinel == nil) != (tc.expectRedis.Sentinel == nil) || (got.Cluster == nil) != (tc.expectRedis.Cluster == nil) {
				t.Fatalf("redis %+v, want %+v", got, tc.expectRedis)
			}
			if s, w := got.Sentinel, tc.expectRedis.Sentinel; s != nil && (s.Master != w.Master || s.DB != w.DB || !slices.Equal(s.Addrs, w.Addrs)) {
				t.Errorf("sentinel %+v, want %+v", s, w)
			}
			if c, w := got.Cluster, tc.expectRedis.Cluster; c != nil && !slices.Equal(c.Addrs, w.Addrs) {
				t.Errorf("cluster %+v, want %+v", c, w)
			}
			if pc.QueueShards != tc.expectShard {
				t.Errorf("queue shards %d, want %d", pc.QueueShards, tc.expectShard)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("process config's Redis does not validate: %v", err)
			}
		})
	}
}

func TestConfigRedisErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		givenYAML  string
		givenEnv   map[string]string
		expectText []string
	}{
		{
			name:       "redis_url and redis_cluster",
			givenYAML:  strings.Replace(validConfig, "redis_url: redis://127.0.0.1:6379/0\n", "redis_url: redis://127.0.0.1:6379/0\nredis_cluster:\n  addrs: [\"n1:7000\"]\n", 1),
			expectText: []string{"w.yaml:5:", "redis_url", "redis_cluster", "only one"},
		},
		{
			name:       "redis_sentinel and redis_cluster",
			givenYAML:  redisYAML("redis_sentinel:\n  master: m\n  addrs: [\"s1:26379\"]\nredis_cluster:\n  addrs: [\"n1:7000\"]\n"),
			expectText: []string{"redis_sentinel", "redis_cluster", "only one"},
		},
		{
			name:       "REDIS_URL and redis_sentinel",
			givenYAML:  redisYAML("redis_sentinel:\n  master: m\n  addrs: [\"s1:26379\"]\n"),
			givenEnv:   map[string]string{"REDIS_URL": "redis://other:6379/0"},
			expectText: []string{"REDIS_URL", "redis_sentinel", "only one"},
		},
		{
			name:       "sentinel without master",
			givenYAML:  redisYAML("redis_sentinel:\n  addrs: [\"s1:26379\"]\n"),
			expectText: []string{"redis_sentinel.master", "required"},
		},
		{
			name:       "sentinel without addrs",
			givenYAML:  redisYAML("redis_sentinel:\n  master: m\n"),
			expectText: []string{"redis_sentinel.addrs", "host:port"},
		},
		{
			name:       "sentinel negative db",
			givenYAML:  redisYAML("redis_sentinel:\n  master: m\n  addrs: [\"s1:26379\"]\n  db: -1\n"),
			expectText: []string{"redis_sentinel.db"},
		},
		{
			name:       "cluster address without port",
			givenYAML:  redisYAML("redis_cluster:\n  addrs:\n    - n1:7000\n    - n2\n"),
			expectText: []string{"w.yaml:7:", "redis_cluster.addrs[1]", `"n2"`},
		},
		{
			name:       "unknown key under redis_cluster",
			givenYAML:  redisYAML("redis_cluster:\n  nodes: [\"n1:7000\"]\n"),
			expectText: []string{"w.yaml:5: redis_cluster.nodes: unknown key"},
		},
		{
			name:       "queue_shards negative",
			givenYAML:  strings.Replace(validConfig, "lease: 1m", "lease: 1m\nqueue_shards: -2", 1),
			expectText: []string{"queue_shards", "between 1 and"},
		},
		{
			name:       "queue_shards too many",
			givenYAML:  strings.Replace(validConfig, "lease: 1m", "lease: 1m\nqueue_shards: 100000", 1),
			expectText: []string{"queue_shards", "between 1 and"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := map[string]string{"STRIPE_SECRET": "whsec_x", "SIGNING": signingSecret}
			for k, v := range tc.givenEnv {
				e[k] = v
			}
			_, err := Parse("w.yaml", []byte(tc.givenYAML), env(e))
			if err == nil {
				t.Fatal("expected an error")
			}
			for _, want := range tc.expectText {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}

// TestComposeSentinelConfigIsValid: the config compose.sentinel.yaml
// mounts parses, with compose's environment (REDIS_URL empty).
func TestComposeSentinelConfigIsValid(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../compose.webhookd-sentinel.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse("compose.webhookd-sentinel.yaml", raw, env(map[string]string{
		"REDIS_URL": "", "STRIPE_WEBHOOK_SECRET": "whsec_demo", "DEMO_DESTINATION_URL": "http://sink:9000/hooks/demo",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if r := cfg.Process.Redis; r.Sentinel == nil || r.Sentinel.Master != "webhookd" || len(r.Sentinel.Addrs) != 3 {
		t.Fatalf("redis %+v, want the sentinels", r)
	}
}
