package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/dedupe"
)

// ErrUnknownSource is returned when a source (or a destination of it) is
// not configured: a webhook to it, a replay of it, a task for it.
var ErrUnknownSource = errors.New("unknown source")

// taskTimeoutMargin is added to a destination's timeout to bound the whole
// task (claim, call, store).
const taskTimeoutMargin = 30 * time.Second

// deliverTask is what both ways of enqueuing write for one key: the task
// id, its queue (the key's shard), its payload and its timeout.
type deliverTask struct {
	id      string
	queue   string
	payload []byte
	timeout time.Duration
}

func (e *Enqueuer) newDeliverTask(p DeliverPayload, dest Destination) (deliverTask, error) {
	body, err := json.Marshal(p)
	if err != nil {
		return deliverTask{}, fmt.Errorf("error encoding deliver payload: %w", err)
	}
	key := p.Key()
	return deliverTask{id: key, queue: e.shards.Of(key), payload: body, timeout: dest.Timeout + taskTimeoutMargin}, nil
}

// Enqueuer puts deliver tasks on the queue, one per (event, destination),
// with the job key as the Asynq task id, each in its key's shard.
type Enqueuer struct {
	client *asynq.Client // one task per round trip (Enqueue)
	rdb    redis.UniversalClient
	shards Shards
	routes RouteSource
}

// NewEnqueuer returns an Enqueuer on rdb that writes every task to queue
// (DefaultQueue when empty). Closing rdb is the caller's.
func NewEnqueuer(rdb redis.UniversalClient, queue string, routes RouteSource) *Enqueuer {
	return NewShardedEnqueuer(rdb, Shards{Queue: queue, N: 1}, routes)
}

// NewShardedEnqueuer returns an Enqueuer on rdb that writes each task to
// its key's shard (Shards.Of); an empty Queue is DefaultQueue. Closing
// rdb is the caller's.
func NewShardedEnqueuer(rdb redis.UniversalClient, shards Shards, routes RouteSource) *Enqueuer {
	if shards.Queue == "" {
		shards.Queue = DefaultQueue
	}
	shards.N = shards.n()
	return &Enqueuer{
		client: asynq.NewClientFromRedisClient(rdb),
		rdb:    rdb,
		shards: shards,
		routes: routes,
	}
}

// Queue returns the queue's base name.
func (e *Enqueuer) Queue() string { return e.shards.Queue }

// Shards returns how tasks are spread over queues.
func (e *Enqueuer) Shards() Shards { return e.shards }

// Enqueue enqueues the task for p. A task with the same key already in
// the queue (pending, scheduled, retrying, active or archived) counts as
// queued: it returns nil.
func (e *Enqueuer) Enqueue(ctx context.Context, p DeliverPayload) error {
	dest, ok := e.routes.Load()[p.Source][p.Destination]
	if !ok {
		return fmt.Errorf("error enqueuing %s/%s: %w", p.Source, p.Destination, ErrUnknownSource)
	}
	t, err := e.newDeliverTask(p, dest)
	if err != nil {
		return err
	}
	_, err = e.client.EnqueueContext(ctx, asynq.NewTask(TypeDeliver, t.payload),
		asynq.TaskID(t.id),
		asynq.Queue(t.queue),
		asynq.MaxRetry(maxTaskRetry),
		asynq.Timeout(t.timeout),
	)
	if err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("error enqueuing key %s: %w", p.Key(), err)
	}
	return nil
}

// EnqueueEvent enqueues one task per destination of the event's source.
func (e *Enqueuer) EnqueueEvent(ctx context.Context, source, eventID string) error {
	dests, ok := e.routes.Load()[source]
	if !ok {
		return fmt.Errorf("error enqueuing event of %s: %w", source, ErrUnknownSource)
	}
	for name := range dests {
		if err := e.Enqueue(ctx, DeliverPayload{Source: source, EventID: eventID, Destination: name}); err != nil {
			return err
		}
	}
	return nil
}

// EnqueueEvents enqueues the task of every destination of each event, in
// as few Redis round trips as the batch allows (one per 500 tasks). Events
// whose source has no route are skipped and returned as unrouted. On error
// the caller should treat every event as not queued: enqueuing them again
// leaves the tasks already written as they are.
func (e *Enqueuer) EnqueueEvents(ctx context.Context, refs []dedupe.EventRef) (unrouted []dedupe.EventRef, err error) {
	tasks := make([]deliverTask, 0, len(refs))
	routes := e.routes.Load()
	for _, ref := range refs {
		dests, ok := routes[ref.Source]
		if !ok {
			unrouted = append(unrouted, ref)
			continue
		}
		plan := ref.Plan
		if plan == nil {
			plan = routes.Plan(ref.Source, ref.EventType)
		}
		for _, name := range plan {
			dest, configured := dests[name]
			if !configured {
				continue // removed since the event was planned
			}
			t, err := e.newDeliverTask(DeliverPayload{Source: ref.Source, EventID: ref.ExternalID, Destination: name}, dest)
			if err != nil {
				return unrouted, err
			}
			tasks = append(tasks, t)
		}
	}
	if err := e.writeTasks(ctx, tasks); err != nil {
		return unrouted, fmt.Errorf("error enqueuing %d events: %w", len(refs), err)
	}
	return unrouted, nil
}

// Requeue makes sure p's task will run soon, for a replay that has just
// made its run due in Postgres: a missing task is written, an archived or
// completed one is made pending with a fresh message, a scheduled or
// retrying one is made pending now, and a pending or active one is left
// as it is. If this fails, the reconciler does it once Redis answers.
func (e *Enqueuer) Requeue(ctx context.Context, p DeliverPayload) error {
	dest, ok := e.routes.Load()[p.Source][p.Destination]
	if !ok {
		return fmt.Errorf("error requeuing %s/%s: %w", p.Source, p.Destination, ErrUnknownSource)
	}
	t, err := e.newDeliverTask(p, dest)
	if err != nil {
		return err
	}
	if _, err := e.ensureTasks(ctx, []ensureRequest{{task: t, takeAfter: time.Now()}}); err != nil {
		return fmt.Errorf("error requeuing key %s: %w", p.Key(), err)
	}
	return nil
}
