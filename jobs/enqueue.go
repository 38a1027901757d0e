package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
)

// ErrUnknownSource is returned when an event's source has no route.
var ErrUnknownSource = errors.New("unknown source")

// taskTimeoutMargin is added to a destination's timeout to bound the whole
// task (claim, call, store).
const taskTimeoutMargin = 30 * time.Second

// Enqueuer puts deliver tasks on the queue, one per (event, destination),
// with the job key as the Asynq task id.
type Enqueuer struct {
	client *asynq.Client
	queue  string
	routes Routes
}

// NewEnqueuer returns an Enqueuer on client for queue (DefaultQueue when
// empty).
func NewEnqueuer(client *asynq.Client, queue string, routes Routes) *Enqueuer {
	if queue == "" {
		queue = DefaultQueue
	}
	return &Enqueuer{client: client, queue: queue, routes: routes}
}

// Queue returns the queue's name.
func (e *Enqueuer) Queue() string { return e.queue }

// Enqueue enqueues the task for p. A task with the same key already in
// the queue (pending, scheduled, retrying, active or archived) counts as
// queued: it returns nil.
func (e *Enqueuer) Enqueue(ctx context.Context, p DeliverPayload) error {
	dest, ok := e.routes[p.Source][p.Destination]
	if !ok {
		return fmt.Errorf("error enqueuing %s/%s: %w", p.Source, p.Destination, ErrUnknownSource)
	}
	body, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("error encoding deliver payload: %w", err)
	}
	_, err = e.client.EnqueueContext(ctx, asynq.NewTask(TypeDeliver, body),
		asynq.TaskID(p.Key()),
		asynq.Queue(e.queue),
		asynq.MaxRetry(maxTaskRetry),
		asynq.Timeout(dest.WithDefaults().Timeout+taskTimeoutMargin),
	)
	if err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("error enqueuing key %s: %w", p.Key(), err)
	}
	return nil
}

// EnqueueEvent enqueues one task per destination of the event's source.
func (e *Enqueuer) EnqueueEvent(ctx context.Context, source, eventID string) error {
	dests, ok := e.routes[source]
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
