// Package sink is a small destination for demos and load tests: it answers
// every POST with 200, counts calls per Idempotency-Key, and reports the
// counts, so anyone can see that each key arrived once.
package sink

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Sink is an http.Handler that records calls.
type Sink struct {
	mu     sync.Mutex
	counts map[string]int
	total  atomic.Int64
	first  atomic.Int64 // unix nanos of the first call
	last   atomic.Int64 // unix nanos of the latest call
	log    *slog.Logger
}

// New returns a Sink. With log set, every call is logged.
func New(log *slog.Logger) *Sink {
	return &Sink{counts: make(map[string]int), log: log}
}

// Stats summarises what the sink saw.
type Stats struct {
	// Calls counts every call.
	Calls int64 `json:"calls"`
	// Keys counts distinct Idempotency-Keys.
	Keys int `json:"keys"`
	// Repeated lists keys called more than once, with their counts.
	Repeated map[string]int `json:"repeated"`
	// First and Last are the times of the first and latest call.
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
}

// ServeHTTP records a POST, or answers GET /stats with Stats.
func (s *Sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/stats" {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.Stats())
		return
	}
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	n, _ := io.Copy(io.Discard, r.Body)
	key := r.Header.Get("Idempotency-Key")
	s.mu.Lock()
	s.counts[key]++
	count := s.counts[key]
	s.mu.Unlock()
	now := time.Now().UnixNano()
	s.total.Add(1)
	s.first.CompareAndSwap(0, now)
	s.last.Store(now)
	if s.log != nil {
		s.log.Info("sink received a call",
			slog.String("key", key),
			slog.String("source", r.Header.Get("Webhookd-Source")),
			slog.String("event_id", r.Header.Get("Webhookd-Event-Id")),
			slog.String("attempt", r.Header.Get("Webhookd-Attempt")),
			slog.Int("calls_for_key", count),
			slog.Int64("body_bytes", n))
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"ok":true,"calls_for_key":` + strconv.Itoa(count) + "}"))
}

// Stats returns what the sink saw so far.
func (s *Sink) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Calls: s.total.Load(), Keys: len(s.counts), Repeated: map[string]int{}}
	for k, n := range s.counts {
		if n > 1 {
			st.Repeated[k] = n
		}
	}
	if f := s.first.Load(); f != 0 {
		st.First = time.Unix(0, f)
		st.Last = time.Unix(0, s.last.Load())
	}
	return st
}

// Keys returns the number of distinct keys seen so far; unlike Stats it
// does not walk them, so it is cheap to call often.
func (s *Sink) Keys() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.counts)
}

// Count returns the calls seen for key.
func (s *Sink) Count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[key]
}
