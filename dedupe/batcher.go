package dedupe

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrBatcherClosed is returned by [Batcher.Record] after [Batcher.Close].
var ErrBatcherClosed = errors.New("batcher closed")

// BatcherConfig tunes group commit.
type BatcherConfig struct {
	// MaxBatch caps the events in one statement. Defaults to 256.
	MaxBatch int
	// MaxInFlight caps the statements running at once. While all are
	// busy, new events queue up and go out together in the next one.
	// Defaults to 4.
	MaxInFlight int
	// StatementTimeout bounds one batch statement. Defaults to 5s.
	StatementTimeout time.Duration
}

// WithDefaults returns a copy of c with zero fields set to their defaults.
func (c BatcherConfig) WithDefaults() BatcherConfig {
	if c.MaxBatch <= 0 {
		c.MaxBatch = 256
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 4
	}
	if c.StatementTimeout <= 0 {
		c.StatementTimeout = 5 * time.Second
	}
	return c
}

// Batcher records events with group commit: callers that arrive while
// statements are running share the next multi-row statement, and each is
// answered when that statement has committed. There is no timer: a lone
// event goes out at once; under load batches grow by themselves.
type Batcher struct {
	db       DB
	cfg      BatcherConfig
	requests chan *recordRequest
	slots    chan struct{}
	stop     chan struct{}
	done     chan struct{}
	closing  sync.Once
}

type recordRequest struct {
	event  Event
	result chan recordResult
}

type recordResult struct {
	rec Recorded
	err error
}

var requestPool = sync.Pool{New: func() any {
	return &recordRequest{result: make(chan recordResult, 1)}
}}

// NewBatcher starts a Batcher that runs its statements on db. Close it to
// stop.
func NewBatcher(db DB, cfg BatcherConfig) *Batcher {
	cfg = cfg.WithDefaults()
	b := &Batcher{
		db:       db,
		cfg:      cfg,
		requests: make(chan *recordRequest, cfg.MaxBatch*cfg.MaxInFlight),
		slots:    make(chan struct{}, cfg.MaxInFlight),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go b.loop()
	return b
}

// Record records one delivery of ev and returns once the statement that
// carried it has committed (or failed). If ctx ends first, Record returns
// ctx's error; the event may still be committed, which is why an event's
// hand-off is tracked in the table and not only in memory.
func (b *Batcher) Record(ctx context.Context, ev Event) (Recorded, error) {
	req := requestPool.Get().(*recordRequest)
	req.event = ev
	select {
	case b.requests <- req:
	case <-b.stop:
		return Recorded{}, ErrBatcherClosed
	case <-ctx.Done():
		return Recorded{}, ctx.Err()
	}
	select {
	case res := <-req.result:
		req.event = Event{}
		requestPool.Put(req)
		return res.rec, res.err
	case <-b.done:
		// The loop is gone; it may have answered just before leaving.
		select {
		case res := <-req.result:
			return res.rec, res.err
		default:
			return Recorded{}, ErrBatcherClosed
		}
	case <-ctx.Done():
		// The request stays owned by the batch; it is not reused.
		return Recorded{}, ctx.Err()
	}
}

// Close stops accepting events, waits for running statements, and answers
// queued callers with ErrBatcherClosed.
func (b *Batcher) Close() {
	b.closing.Do(func() { close(b.stop) })
	<-b.done
}

func (b *Batcher) loop() {
	defer close(b.done)
	var wg sync.WaitGroup
	defer wg.Wait()
	batch := make([]*recordRequest, 0, b.cfg.MaxBatch)
	for {
		// Take a statement slot first: while all slots are busy, events
		// accumulate in the channel and form the next batch.
		select {
		case b.slots <- struct{}{}:
		case <-b.stop:
			b.drainClosed()
			return
		}
		select {
		case req := <-b.requests:
			batch = append(batch, req)
		case <-b.stop:
			<-b.slots
			b.drainClosed()
			return
		}
	fill:
		for len(batch) < b.cfg.MaxBatch {
			select {
			case req := <-b.requests:
				batch = append(batch, req)
			default:
				break fill
			}
		}
		wg.Add(1)
		go func(batch []*recordRequest) {
			defer wg.Done()
			defer func() { <-b.slots }()
			b.flush(batch)
		}(batch)
		batch = make([]*recordRequest, 0, b.cfg.MaxBatch)
	}
}

func (b *Batcher) drainClosed() {
	for {
		select {
		case req := <-b.requests:
			req.result <- recordResult{err: ErrBatcherClosed}
		default:
			return
		}
	}
}

func (b *Batcher) flush(batch []*recordRequest) {
	events := make([]Event, len(batch))
	for i, req := range batch {
		events[i] = req.event
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.StatementTimeout)
	defer cancel()
	recs, err := RecordBatch(ctx, b.db, events)
	if err != nil {
		err = fmt.Errorf("error recording batch of %d: %w", len(batch), err)
		for _, req := range batch {
			req.result <- recordResult{err: err}
		}
		return
	}
	for i, req := range batch {
		req.result <- recordResult{rec: recs[i]}
	}
}
