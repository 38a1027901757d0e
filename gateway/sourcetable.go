package gateway

import "sync/atomic"

// Sources is the configured senders, by name.
type Sources map[string]Source

// Load returns s: fixed sources are their own SourceLoader.
func (s Sources) Load() Sources { return s }

// SourceLoader gives the sources in force: Sources never change; a
// *SourceTable is what a reload swaps. A request loads once and keeps
// what it loaded.
type SourceLoader interface {
	Load() Sources
}

// SourceTable holds the sources a reload swaps, for the gateway and the
// admin API at once.
type SourceTable struct {
	sources atomic.Pointer[Sources]
}

// NewSourceTable returns a table holding s.
func NewSourceTable(s Sources) *SourceTable {
	t := &SourceTable{}
	t.Store(s)
	return t
}

// Load returns the sources in force.
func (t *SourceTable) Load() Sources { return *t.sources.Load() }

// Store puts s in force for every request that loads after it.
func (t *SourceTable) Store(s Sources) { t.sources.Store(&s) }
