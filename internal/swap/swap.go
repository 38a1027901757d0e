// Package swap holds a value that is replaced whole and read without a
// lock: the configuration a reload puts in force (jobs.RouteTable,
// gateway.SourceTable). A reader loads once and keeps what it loaded, so
// one decision sees one configuration.
package swap

import "sync/atomic"

// Value holds a T.
type Value[T any] struct {
	p atomic.Pointer[T]
}

// New returns a Value holding v.
func New[T any](v T) *Value[T] {
	s := &Value[T]{}
	s.Store(v)
	return s
}

// Load returns the value in force.
func (s *Value[T]) Load() T { return *s.p.Load() }

// Store puts v in force for every Load after it.
func (s *Value[T]) Store(v T) { s.p.Store(&v) }
