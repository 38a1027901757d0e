package jobs

import (
	"maps"
	"slices"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/glob"
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

// DestinationCounts returns how many destinations each source has (what
// dedupe's event state needs to tell queued from done).
func (r Routes) DestinationCounts() map[string]int {
	m := make(map[string]int, len(r))
	for source, dests := range r {
		m[source] = len(dests)
	}
	return m
}

// DestinationFilters returns the destinations that filter by event type,
// with their patterns as SQL LIKE patterns (what dedupe's event states
// need to leave out the destinations an event is not for).
func (r Routes) DestinationFilters() []dedupe.DestinationFilter {
	var out []dedupe.DestinationFilter
	for source, dests := range r {
		for name, d := range dests {
			if d.Filter != nil {
				out = append(out, dedupe.DestinationFilter{Source: source, Destination: name, Like: d.Filter.Like()})
			}
		}
	}
	return out
}

// SourceFilters returns the filters of source's destinations that filter
// by event type (gateway.Source.Filters).
func (r Routes) SourceFilters(source string) []glob.Filter {
	var out []glob.Filter
	for _, d := range r[source] {
		if d.Filter != nil {
			out = append(out, d.Filter)
		}
	}
	return out
}
