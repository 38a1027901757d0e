package jobs

import (
	"maps"
	"slices"
	"time"

	"github.com/webhookd/webhookd/internal/swap"
)

// Routes maps a source name to its destinations by name.
type Routes map[string]map[string]Destination

// anyFIFO reports whether some destination calls its entities' events in
// order, one at a time (order mode fifo).
func (r Routes) anyFIFO() bool {
	for _, dests := range r {
		for _, d := range dests {
			if d.Order.FIFO {
				return true
			}
		}
	}
	return false
}

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

// Handover carries into r, the routes a reload is about to put in
// force, what each destination that same reports unchanged since old
// holds open: its broker connection and its OAuth2 token. An HTTP
// destination takes its new kind, whose tls: files were read again (a
// certificate renewed on disk comes into force with a reload). It
// returns the kinds of old that r no longer uses, for Retire.
func (r Routes) Handover(old Routes, same func(source, destination string) bool) Routes {
	retired := Routes{}
	for source, dests := range old {
		for name, d := range dests {
			if next, ok := r[source][name]; ok && same(source, name) {
				next.Auth = d.Auth
				_, isHTTP := d.kind.(httpKind)
				keep := d.kind != nil && !isHTTP
				if keep {
					next.kind = d.kind
				}
				r[source][name] = next
				if keep {
					continue
				}
			}
			if retired[source] == nil {
				retired[source] = map[string]Destination{}
			}
			retired[source][name] = d
		}
	}
	return retired
}

// Retire closes what r's destinations hold open once the calls that
// loaded them have ended: after grace (the lease, within which every
// call ends).
func (r Routes) Retire(grace time.Duration) {
	if len(r) > 0 {
		time.AfterFunc(grace, r.Close)
	}
}

// Close closes what r's destinations hold open (broker connections,
// tls: clients' idle connections); a call after it fails.
func (r Routes) Close() {
	for _, dests := range r {
		for _, d := range dests {
			if d.kind != nil {
				d.kind.close()
			}
		}
	}
}

// RouteSource gives the routes in force. Routes is one that never
// changes; a *RouteTable is one a reload swaps. A decision loads once and
// keeps what it loaded, so a call in flight finishes under the
// configuration it started with.
type RouteSource interface {
	Load() Routes
}

// Load returns r: fixed routes are their own source.
func (r Routes) Load() Routes { return r }

// RouteTable holds the routes a reload swaps, for every part of a process
// at once (gateway plan, hand-off, worker, recovery, replay, admin).
type RouteTable = swap.Value[Routes]

// NewRouteTable returns a table holding r.
func NewRouteTable(r Routes) *RouteTable { return swap.New(r) }
