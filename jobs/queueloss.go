package jobs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
)

// reopenStore is what the queue-loss check needs from dedupe.Store.
type reopenStore interface {
	ReopenUnfinished(ctx context.Context, since, until time.Time, destinations map[string]int, batchSize int) (int, error)
}

// QueueLossCheck notices when Redis has lost the queue's data (a restart
// without persistence, a flush, a failover to an empty replica) and puts
// every recent unfinished event back in the relay's outbox, so nothing
// acknowledged is lost with it. It keeps a marker key in Redis; a marker
// that vanished means the data went with it. Replicas race for the new
// marker with SET NX, and only the winner reopens.
type QueueLossCheck struct {
	rdb      redis.UniversalClient
	store    reopenStore
	key      string
	queue    string
	lookback time.Duration
	dests    map[string]int
	log      *slog.Logger
}

// NewQueueLossCheck returns a check for enqueuer's queue that reopens
// events received within lookback (use the retention window).
func NewQueueLossCheck(rdb redis.UniversalClient, store reopenStore, enqueuer *Enqueuer, lookback time.Duration, log *slog.Logger) *QueueLossCheck {
	if log == nil {
		log = slog.Default()
	}
	return &QueueLossCheck{
		rdb: rdb, store: store, key: "webhookd:{" + enqueuer.queue + "}:marker", queue: enqueuer.queue,
		lookback: lookback, dests: enqueuer.routes.DestinationCounts(), log: log,
	}
}

// asynqQueuesKey is Asynq's registry of queue names (base.AllQueues in
// asynq v0.26), which its Inspector, asynqmon and our queue-size metrics
// list. Asynq's client adds a queue to it once per process, so after Redis
// lost its data nothing would until every client restarted.
const asynqQueuesKey = "asynq:queues"

// Check looks for the marker and, if it is gone, sets a new one and
// reopens unfinished events. It returns how many it reopened.
func (q *QueueLossCheck) Check(ctx context.Context) (int, error) {
	n, err := q.rdb.Exists(ctx, q.key).Result()
	if err != nil {
		return 0, fmt.Errorf("error reading queue marker: %w", err)
	}
	if n == 1 {
		return 0, nil
	}
	if err := q.rdb.SAdd(ctx, asynqQueuesKey, q.queue).Err(); err != nil {
		return 0, fmt.Errorf("error registering queue %s: %w", q.queue, err)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	won, err := q.rdb.SetNX(ctx, q.key, hex.EncodeToString(b[:]), 0).Result()
	if err != nil {
		return 0, fmt.Errorf("error setting queue marker: %w", err)
	}
	if !won {
		return 0, nil // another replica is on it
	}
	q.log.WarnContext(ctx, "queue marker missing: Redis is new or lost its data; re-enqueuing unfinished events",
		slog.Duration("lookback", q.lookback))
	// Events received from now on are handed off as usual; only those
	// before the loss are in doubt.
	now := time.Now()
	reopened, err := q.store.ReopenUnfinished(ctx, now.Add(-q.lookback), now, q.dests, 1000)
	if err != nil {
		// Let the next check try again.
		_ = q.rdb.Del(context.WithoutCancel(ctx), q.key).Err()
		return reopened, err
	}
	if reopened > 0 {
		q.log.WarnContext(ctx, "reopened unfinished events for the relay", slog.Int("events", reopened))
	}
	return reopened, nil
}
