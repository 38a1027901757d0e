package loadgen

import (
	"math/rand/v2"
	"strconv"
	"sync"
)

// preloadID returns the id of the n-th preloaded event. Zero-padded, so
// the preload appends to the primary key's index in order.
func preloadID(n int64) string {
	return "evt_pre_" + pad(n)
}

func pad(n int64) string {
	s := strconv.FormatInt(n, 10)
	if len(s) >= 9 {
		return s
	}
	return "000000000"[:9-len(s)] + s
}

// makeBody returns a Stripe-like JSON event of size bytes (or the
// smallest such event when size is smaller), the same bytes for the same
// id, as a sender's retry would be.
func makeBody(id string, n int64, size int) []byte {
	b := make([]byte, 0, max(size, 160))
	b = append(b, `{"id":"`...)
	b = append(b, id...)
	b = append(b, `","event_id":"`...)
	b = append(b, id...)
	b = append(b, `","object":"event","type":"bench.created","created":`...)
	b = strconv.AppendInt(b, 1700000000+n, 10)
	b = append(b, `,"data":{"object":{"id":"obj_`...)
	b = strconv.AppendInt(b, n, 10)
	b = append(b, `","pad":"`...)
	tail := `"}}}`
	for len(b)+len(tail) < size {
		b = append(b, 'x')
	}
	return append(b, tail...)
}

// pick is one request's choice of event.
type pick struct {
	pre bool  // a preloaded event
	n   int64 // its number
}

// book hands out event ids and counts, per id, the copies sent and the
// copies acknowledged (2xx), for the exactly-once check.
type book struct {
	runID   string
	preload int64

	mu       sync.Mutex
	sent     []int32 // copies sent, by in-run id number
	acked    []int32 // 2xx answers, by in-run id number
	preSent  map[int64]int32
	preAcked map[int64]int32
}

func newBook(runID string, preload int64) *book {
	return &book{runID: runID, preload: preload, preSent: map[int64]int32{}, preAcked: map[int64]int32{}}
}

func (b *book) id(p pick) string {
	if p.pre {
		return preloadID(p.n)
	}
	return "evt_" + b.runID + "_" + strconv.FormatInt(p.n, 10)
}

// next picks the event for one request: with probability dup a repeat of
// an id already sent (or preloaded), else a new id. It counts the copy as
// sent.
func (b *book) next(r *rand.Rand, dup float64) pick {
	b.mu.Lock()
	defer b.mu.Unlock()
	total := b.preload + int64(len(b.sent))
	if dup > 0 && total > 0 && (dup >= 1 || r.Float64() < dup) {
		k := r.Int64N(total)
		if k < b.preload {
			b.preSent[k]++
			return pick{pre: true, n: k}
		}
		k -= b.preload
		b.sent[k]++
		return pick{n: k}
	}
	n := int64(len(b.sent))
	b.sent = append(b.sent, 1)
	b.acked = append(b.acked, 0)
	return pick{n: n}
}

// ack counts a 2xx answer for p.
func (b *book) ack(p pick) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p.pre {
		b.preAcked[p.n]++
		return
	}
	b.acked[p.n]++
}
