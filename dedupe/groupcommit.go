package dedupe

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// BatcherConfig tunes group commit.
type BatcherConfig struct {
	// MaxBatch caps the items in one statement. Defaults to 256.
	MaxBatch int
	// MaxInFlight caps the statements running at once. While all are
	// busy, new items queue up and go out together in the next one.
	// Defaults to 4.
	MaxInFlight int
	// StatementTimeout bounds one batch statement. Defaults to 5s.
	StatementTimeout time.Duration
	// Linger is how long a batch smaller than LingerBelow waits for more
	// items before its statement goes out. At moderate rates a statement
	// would otherwise carry one or two items and its fixed cost would be
	// paid per item; under load batches are larger than LingerBelow and
	// nothing waits. Defaults to 0: no waiting.
	Linger time.Duration
	// LingerBelow is the batch size that no longer waits. Defaults to 8.
	LingerBelow int
	// OverlapAfter, with MaxInFlight above 1, holds a further statement
	// back until the newest running one has run this long: while
	// statements are quick one runs at a time and the next batch grows
	// meanwhile (fewer, larger statements: less Postgres and process time
	// per item); when one is slow (a lock wait, a slow disk) the others
	// go out beside it instead of waiting for it. Defaults to 0: up to
	// MaxInFlight statements whenever items wait.
	OverlapAfter time.Duration
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
	if c.LingerBelow <= 0 {
		c.LingerBelow = 8
	}
	return c
}

// ErrInvalidInput is returned by Batcher.Record (and the RunBatcher's
// methods) for an item whose own values Postgres refused: a data
// exception such as invalid UTF-8 or a NUL in a text column, an integrity
// constraint violation, or a program limit such as an index row too
// large. The item was not written, the other items of its statement were,
// and sending it again fails again.
var ErrInvalidInput = errors.New("values refused by the database")

// groupCommit runs one statement for many concurrent callers: callers
// that arrive while statements are running share the next one, and each
// is answered when it has committed. Under load batches grow by
// themselves; without Linger a lone item goes out at once, with it a small
// batch waits that long for company.
type groupCommit[Req, Res any] struct {
	cfg      BatcherConfig
	flush    func(ctx context.Context, reqs []Req) ([]Res, error)
	requests chan *pendingItem[Req, Res]
	slots    chan struct{}
	stop     chan struct{}
	done     chan struct{}
	closing  sync.Once
	pool     sync.Pool
}

type pendingItem[Req, Res any] struct {
	req    Req
	result chan itemResult[Res]
}

type itemResult[Res any] struct {
	res Res
	err error
}

// newGroupCommit starts the loop; flush must return one result per
// request, in order, or an error for all of them. A flush that fails with
// a row error (see isRowError) must have written nothing, as one
// statement does: its requests are flushed again in smaller batches.
func newGroupCommit[Req, Res any](cfg BatcherConfig, flush func(context.Context, []Req) ([]Res, error)) *groupCommit[Req, Res] {
	cfg = cfg.WithDefaults()
	g := &groupCommit[Req, Res]{
		cfg:      cfg,
		flush:    flush,
		requests: make(chan *pendingItem[Req, Res], cfg.MaxBatch*cfg.MaxInFlight),
		slots:    make(chan struct{}, cfg.MaxInFlight),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	g.pool.New = func() any { return &pendingItem[Req, Res]{result: make(chan itemResult[Res], 1)} }
	go g.loop()
	return g
}

// do submits req and waits for its statement. If ctx ends first it
// returns ctx's error; the item may still be committed.
func (g *groupCommit[Req, Res]) do(ctx context.Context, req Req) (Res, error) {
	var zero Res
	item := g.pool.Get().(*pendingItem[Req, Res])
	item.req = req
	select {
	case g.requests <- item:
	case <-g.stop:
		return zero, ErrBatcherClosed
	case <-ctx.Done():
		return zero, ctx.Err()
	}
	select {
	case r := <-item.result:
		var empty Req
		item.req = empty
		g.pool.Put(item)
		return r.res, r.err
	case <-g.done:
		// The loop is gone; it may have answered just before leaving.
		select {
		case r := <-item.result:
			return r.res, r.err
		default:
			return zero, ErrBatcherClosed
		}
	case <-ctx.Done():
		// The item stays owned by its batch; it is not reused.
		return zero, ctx.Err()
	}
}

// close stops accepting items, waits for running statements, and answers
// queued callers with ErrBatcherClosed.
func (g *groupCommit[Req, Res]) close() {
	g.closing.Do(func() { close(g.stop) })
	<-g.done
}

func (g *groupCommit[Req, Res]) loop() {
	defer close(g.done)
	var wg sync.WaitGroup
	defer wg.Wait()
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	var newest statement // the newest statement sent
	for {
		// Take a statement slot first: while all slots are busy, items
		// accumulate in the channel and form the next batch.
		select {
		case g.slots <- struct{}{}:
		case <-g.stop:
			g.drainClosed()
			return
		}
		if !g.awaitOverlap(newest, linger) {
			<-g.slots
			g.drainClosed()
			return
		}
		batch := make([]*pendingItem[Req, Res], 0, g.cfg.MaxBatch)
		select {
		case item := <-g.requests:
			batch = append(batch, item)
		case <-g.stop:
			<-g.slots
			g.drainClosed()
			return
		}
		batch = g.fill(batch)
		if len(batch) < g.cfg.LingerBelow && g.cfg.Linger > 0 {
			batch = g.fill(g.waitForCompany(batch, linger))
		}
		newest = statement{sent: time.Now(), done: make(chan struct{})}
		wg.Add(1)
		go func(done chan struct{}) {
			defer wg.Done()
			defer func() { <-g.slots }()
			defer close(done)
			g.run(batch)
		}(newest.done)
	}
}

// statement is a batch's statement as awaitOverlap sees it: when it was
// sent, and done closed when it has ended.
type statement struct {
	sent time.Time
	done chan struct{}
}

// awaitOverlap returns once the newest statement has ended or has run
// OverlapAfter (see BatcherConfig), on timer (which is stopped); false
// if the batcher is closing meanwhile. Only the newest is waited for:
// an earlier one still running had run OverlapAfter (or more) when the
// newest went out.
func (g *groupCommit[Req, Res]) awaitOverlap(newest statement, timer *time.Timer) bool {
	if g.cfg.OverlapAfter <= 0 || newest.done == nil {
		return true
	}
	wait := time.Until(newest.sent.Add(g.cfg.OverlapAfter))
	if wait <= 0 {
		return true
	}
	timer.Reset(wait)
	defer timer.Stop()
	select {
	case <-newest.done:
		return true
	case <-timer.C:
		return true
	case <-g.stop:
		return false
	}
}

// waitForCompany adds items to batch as they arrive until it holds
// LingerBelow, Linger has passed (on timer, which is stopped) or the
// batcher is closing.
func (g *groupCommit[Req, Res]) waitForCompany(batch []*pendingItem[Req, Res], timer *time.Timer) []*pendingItem[Req, Res] {
	timer.Reset(g.cfg.Linger)
	defer timer.Stop()
	for len(batch) < g.cfg.LingerBelow {
		select {
		case item := <-g.requests:
			batch = append(batch, item)
		case <-timer.C:
			return batch
		case <-g.stop:
			return batch
		}
	}
	return batch
}

// fill adds the items already waiting to batch, up to MaxBatch.
func (g *groupCommit[Req, Res]) fill(batch []*pendingItem[Req, Res]) []*pendingItem[Req, Res] {
	for len(batch) < g.cfg.MaxBatch {
		select {
		case item := <-g.requests:
			batch = append(batch, item)
		default:
			return batch
		}
	}
	return batch
}

func (g *groupCommit[Req, Res]) drainClosed() {
	for {
		select {
		case item := <-g.requests:
			item.result <- itemResult[Res]{err: ErrBatcherClosed}
		default:
			return
		}
	}
}

// run commits batch and answers its callers. When Postgres refuses one
// item's values, the statement fails for every item in it; run then
// commits the halves apart, down to single items, so that only the
// refused item gets the error (wrapping ErrInvalidInput) and its
// neighbours are committed. Any other error (connection, timeout) fails
// the whole batch: its callers answer "retry later".
func (g *groupCommit[Req, Res]) run(batch []*pendingItem[Req, Res]) {
	results, err := g.commit(batch)
	if isRowError(err) && len(batch) > 1 {
		mid := len(batch) / 2
		g.run(batch[:mid])
		g.run(batch[mid:])
		return
	}
	if err != nil {
		if isRowError(err) {
			err = fmt.Errorf("%w: %w", ErrInvalidInput, err)
		}
		err = fmt.Errorf("error in batch of %d: %w", len(batch), err)
		for _, item := range batch {
			item.result <- itemResult[Res]{err: err}
		}
		return
	}
	for i, item := range batch {
		item.result <- itemResult[Res]{res: results[i]}
	}
}

// commit runs batch's statement under its own timeout, again after a
// deadlock or serialization failure (which rolled it back: running it
// again is safe).
func (g *groupCommit[Req, Res]) commit(batch []*pendingItem[Req, Res]) ([]Res, error) {
	reqs := make([]Req, len(batch))
	for i, item := range batch {
		reqs[i] = item.req
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.cfg.StatementTimeout)
	defer cancel()
	results, err := g.flush(ctx, reqs)
	for retry := 0; retry < 3 && isTransient(err); retry++ {
		results, err = g.flush(ctx, reqs)
	}
	if err == nil && len(results) != len(batch) {
		err = fmt.Errorf("batch of %d got %d results", len(batch), len(results))
	}
	return results, err
}

// isTransient reports whether err is a deadlock or serialization failure
// that rolled its statement back.
func isTransient(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}

// isRowError reports whether err is Postgres refusing values the
// statement was given, which one item alone may cause: a data exception
// (class 22: invalid UTF-8 or a NUL in text, invalid JSON, a number out of
// range), an integrity constraint violation (class 23) or a program limit
// (class 54: an index row too large). Connection errors, timeouts and
// cancellations are not: they fail the batch as a whole.
func isRowError(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || len(pgErr.Code) != 5 {
		return false
	}
	switch pgErr.Code[:2] {
	case "22", "23", "54":
		return true
	}
	return false
}
