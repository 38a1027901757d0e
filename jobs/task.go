package jobs

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// TypeDeliver is the Asynq task type that forwards one event to one
// destination.
const TypeDeliver = "webhookd:deliver"

// DefaultQueue is the Asynq queue webhookd uses unless configured.
const DefaultQueue = "webhookd"

// maxTaskRetry is the Asynq retry limit of every task: high enough never
// to be reached, since job_runs.attempts decides when a run is dead.
const maxTaskRetry = 1 << 20

// DeliverPayload is the payload of a TypeDeliver task. The event itself
// stays in Postgres; the worker reads it when it claims the key.
type DeliverPayload struct {
	Source      string `json:"source"`
	EventID     string `json:"event_id"`
	Destination string `json:"destination"`
	// Generation is 1, or a forced replay's generation (2, 3, …).
	Generation int `json:"generation,omitempty"`
}

// Key returns the job key: <source>:<destination>:<external_id>, with
// #<generation> appended for a forced replay (see [Key]).
func (p DeliverPayload) Key() string {
	return Key(p.Source, p.Destination, p.EventID, p.Generation)
}

// Key returns the job key of an event, destination and generation:
// <source>:<destination>:<external_id>, with #<generation> appended for a
// forced replay (generation 2 and up). It never contains a time, a random
// value or an attempt number.
//
// Distinct arguments give distinct keys. '#' is the escape: a '#' in the
// event id is written "##", so an id ending in "#2" cannot stand for
// generation 2 of another event's key; in the source and destination
// names (which the configuration limits to [a-z0-9_-], so no key changes)
// '#' is written "##" and ':' "#:", so the first two lone ':' separate the
// parts. A ':' in the event id, the last part, needs no escape. Keys of
// ids without '#' are as they always were; migration 0012 re-keyed the
// runs of ids with one.
func Key(source, destination, eventID string, generation int) string {
	k := nameEscaper.Replace(source) + ":" + nameEscaper.Replace(destination) + ":" + idEscaper.Replace(eventID)
	if generation > 1 {
		k += "#" + strconv.Itoa(generation)
	}
	return k
}

// KeyPrefix is the start every key of source's destination's runs
// shares, and no other key (names are escaped).
func KeyPrefix(source, destination string) string {
	return nameEscaper.Replace(source) + ":" + nameEscaper.Replace(destination) + ":"
}

var (
	nameEscaper = strings.NewReplacer("#", "##", ":", "#:")
	idEscaper   = strings.NewReplacer("#", "##")
)

func (p DeliverPayload) generation() int {
	if p.Generation < 1 {
		return 1
	}
	return p.Generation
}

func decodePayload(b []byte) (DeliverPayload, error) {
	var p DeliverPayload
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("error decoding deliver payload: %w", err)
	}
	if p.Source == "" || p.EventID == "" || p.Destination == "" {
		return p, fmt.Errorf("error decoding deliver payload: source, event_id and destination are required")
	}
	return p, nil
}
