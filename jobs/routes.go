package jobs

import (
	"maps"
	"slices"
)

// Routes maps a source name to its destinations by name.
type Routes map[string]map[string]Destination

// Plan is the one answer to "which destinations want this event": the
// names, sorted, of source's destinations whose filter wants an event of
// eventType. Ingest, the hand-off, recovery and replay all ask it; a
// destination not in the plan gets no run for the event.
func (r Routes) Plan(source, eventType string) []string {
	var out []string
	for name, d := range r[source] {
		if d.Filter.Wants(eventType) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// DestinationNames returns the names of source's destinations, sorted,
// or ErrUnknownSource.
func (r Routes) DestinationNames(source string) ([]string, error) {
	dests, ok := r[source]
	if !ok {
		return nil, ErrUnknownSource
	}
	return slices.Sorted(maps.Keys(dests)), nil
}
