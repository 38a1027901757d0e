package gateway

import "github.com/webhookd/webhookd/internal/swap"

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
type SourceTable = swap.Value[Sources]

// NewSourceTable returns a table holding s.
func NewSourceTable(s Sources) *SourceTable { return swap.New(s) }
