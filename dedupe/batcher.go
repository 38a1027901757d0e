package dedupe

import (
	"context"
	"errors"
)

// ErrBatcherClosed is returned by a batcher's methods after it was closed.
var ErrBatcherClosed = errors.New("batcher closed")

// Batcher records events with group commit: callers that arrive while
// statements are running share the next multi-row statement, and each is
// answered when that statement has committed. Under load batches grow by
// themselves; BatcherConfig.Linger lets a small batch wait for company.
type Batcher struct {
	group *groupCommit[Event, Recorded]
}

// NewBatcher starts a Batcher that runs its statements on db. Close it to
// stop.
func NewBatcher(db DB, cfg BatcherConfig) *Batcher {
	return &Batcher{group: newGroupCommit(cfg, func(ctx context.Context, events []Event) ([]Recorded, error) {
		return RecordBatch(ctx, db, events)
	})}
}

// Record records one delivery of ev and returns once the statement that
// carried it has committed (or failed). If ctx ends first, Record returns
// ctx's error; the event may still be committed, which is why an event's
// hand-off is tracked in the table and not only in memory. Its statement
// may then still read ev: the caller must not reuse ev's byte slices
// after an error.
func (b *Batcher) Record(ctx context.Context, ev Event) (Recorded, error) {
	return b.group.do(ctx, ev)
}

// Close stops accepting events, waits for running statements, and answers
// queued callers with ErrBatcherClosed.
func (b *Batcher) Close() {
	b.group.close()
}
