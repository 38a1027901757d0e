package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// Requeuer puts a key's task on the queue again for a replay. Enqueue
// alone is not enough: a run that failed permanently or died left its
// task archived under the key (its task id), and a second enqueue of that
// id is a conflict that Enqueue treats as "already queued" while nothing
// runs. Requeue runs such a task again instead.
type Requeuer struct {
	enq  *Enqueuer
	insp *asynq.Inspector
}

// NewRequeuer returns a Requeuer that inspects the queue through rdb
// (shared, not closed) and enqueues through enq.
func NewRequeuer(rdb redis.UniversalClient, enq *Enqueuer) *Requeuer {
	return &Requeuer{enq: enq, insp: asynq.NewInspectorFromRedisClient(rdb)}
}

// Requeue makes sure p's task will run: an archived, retrying or
// scheduled task under its key is run now, a completed one is replaced,
// a pending or active one is left as it is, and a missing one is
// enqueued.
func (r *Requeuer) Requeue(ctx context.Context, p DeliverPayload) error {
	key, queue := p.Key(), r.enq.Queue()
	info, err := r.insp.GetTaskInfo(queue, key)
	switch {
	case errors.Is(err, asynq.ErrTaskNotFound), errors.Is(err, asynq.ErrQueueNotFound):
		return r.enq.Enqueue(ctx, p)
	case err != nil:
		return fmt.Errorf("error inspecting task %s: %w", key, err)
	}
	switch info.State {
	case asynq.TaskStateArchived, asynq.TaskStateRetry, asynq.TaskStateScheduled:
		err := r.insp.RunTask(queue, key)
		if errors.Is(err, asynq.ErrTaskNotFound) {
			return r.enq.Enqueue(ctx, p) // gone meanwhile
		}
		if err != nil {
			return fmt.Errorf("error running task %s again: %w", key, err)
		}
		return nil
	case asynq.TaskStateCompleted:
		if err := r.insp.DeleteTask(queue, key); err != nil && !errors.Is(err, asynq.ErrTaskNotFound) {
			return fmt.Errorf("error replacing completed task %s: %w", key, err)
		}
		return r.enq.Enqueue(ctx, p)
	}
	return nil // pending, active or aggregating: it runs anyway
}
