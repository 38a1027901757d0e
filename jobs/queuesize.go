package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// RefreshQueueSizes reads the number of tasks of queue in each state from
// Asynq and sets webhookd_queue_size{queue,state}, and the age of its
// oldest pending task as webhookd_queue_latency_seconds{queue}. A queue
// that does not exist yet counts zero everywhere.
func (m *Metrics) RefreshQueueSizes(rdb redis.UniversalClient, queue string) error {
	if m == nil {
		return nil
	}
	insp := asynq.NewInspectorFromRedisClient(rdb)
	info, err := insp.GetQueueInfo(queue)
	if errors.Is(err, asynq.ErrQueueNotFound) {
		info, err = &asynq.QueueInfo{Queue: queue}, nil
	}
	if err != nil {
		return fmt.Errorf("error reading queue sizes: %w", err)
	}
	for state, n := range map[string]int{
		"pending":   info.Pending,
		"active":    info.Active,
		"scheduled": info.Scheduled,
		"retry":     info.Retry,
		"archived":  info.Archived,
		"completed": info.Completed,
	} {
		m.queueState(queue, state, n)
	}
	m.queueWait(queue, info.Latency)
	return nil
}

// RegisterQueues makes the size and latency of every shard of shards
// exist at zero until its first read.
func (m *Metrics) RegisterQueues(shards Shards) {
	if m == nil {
		return
	}
	for _, q := range shards.Names() {
		for _, state := range []string{"pending", "active", "scheduled", "retry", "archived", "completed"} {
			m.queueState(q, state, 0)
		}
		m.queueWait(q, 0)
	}
}

// WatchQueueSizes refreshes the queue size gauge of every shard of
// shards, and of any shard queue of an earlier shard count Redis still
// lists, every interval (5s when zero) until ctx ends. A failed read is
// logged at debug level: Redis being down shows in readiness and enqueue
// failures already.
func (m *Metrics) WatchQueueSizes(ctx context.Context, rdb redis.UniversalClient, shards Shards, interval time.Duration, log *slog.Logger) {
	if interval <= 0 {
		interval = 5 * time.Second
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		queues, err := shards.ServedQueues(rdb)
		for _, q := range queues {
			if err == nil {
				err = m.RefreshQueueSizes(rdb, q)
			}
		}
		if err != nil && ctx.Err() == nil && log != nil {
			log.DebugContext(ctx, "could not read queue sizes", slog.String("error", err.Error()))
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}
