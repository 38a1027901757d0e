package jobs

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// Shards spreads tasks over N Asynq queues by key. Asynq keeps each
// queue's keys in one Redis Cluster slot (its {queue} hash tag), so one
// queue is one node's work; N queues let a cluster spread it.
//
// With N = 1 the one queue is named Queue, as before shards existed;
// with N > 1 shard i is Queue_i, and a key's shard is the FNV-1a hash of
// the key mod N: stable across processes and restarts, so every writer
// (the relay, recovery, replays) puts a key's task in the same queue and
// Asynq's task-id uniqueness, which holds within a queue, still holds.
//
// Changing N moves keys to other shards. Nothing is lost: workers also
// serve every shard queue of an earlier N that Redis still lists
// (ServedQueues), so tasks already there run (and their claims find
// settled keys settled), and recovery, driven by Postgres, writes any
// unsettled key's task into its new shard when it is missing there.
type Shards struct {
	// Queue is the queue's base name.
	Queue string
	// N is the number of shards; values below 1 count as 1.
	N int
}

// n returns N, at least 1.
func (s Shards) n() int { return max(s.N, 1) }

// Of returns the queue of key.
func (s Shards) Of(key string) string {
	if s.n() == 1 {
		return s.Queue
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return s.name(int(h.Sum32() % uint32(s.n())))
}

// name returns shard i's queue.
func (s Shards) name(i int) string { return s.Queue + "_" + strconv.Itoa(i) }

// Names returns every shard's queue, in order.
func (s Shards) Names() []string {
	if s.n() == 1 {
		return []string{s.Queue}
	}
	out := make([]string, s.n())
	for i := range out {
		out[i] = s.name(i)
	}
	return out
}

// Owns reports whether queue is one of this queue's shards for some N:
// Queue itself or Queue_<digits>.
func (s Shards) Owns(queue string) bool {
	if queue == s.Queue {
		return true
	}
	rest, ok := strings.CutPrefix(queue, s.Queue+"_")
	if !ok || rest == "" {
		return false
	}
	for _, r := range rest {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// Registered returns the queues Asynq lists in Redis (its Inspector)
// that Owns: the shards of the current N that have had a task, and those
// of an earlier N.
func (s Shards) Registered(rdb redis.UniversalClient) ([]string, error) {
	all, err := asynq.NewInspectorFromRedisClient(rdb).Queues()
	if err != nil {
		return nil, fmt.Errorf("error listing queues: %w", err)
	}
	var out []string
	for _, q := range all {
		if s.Owns(q) {
			out = append(out, q)
		}
	}
	slices.Sort(out)
	return out, nil
}

// ServedQueues returns the queues a worker serves: every shard of the
// current N, and every shard queue of an earlier N that Redis still
// lists, so that tasks written there before N changed still run. When
// Redis cannot be read it returns the current shards and the error; the
// worker serves those, and recovery moves what it misses.
func (s Shards) ServedQueues(rdb redis.UniversalClient) ([]string, error) {
	served := s.Names()
	registered, err := s.Registered(rdb)
	for _, q := range registered {
		if !slices.Contains(served, q) {
			served = append(served, q)
		}
	}
	return served, err
}
