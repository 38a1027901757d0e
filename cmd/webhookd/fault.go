package main

import (
	"context"

	"github.com/webhookd/webhookd/dedupe"
)

// recorder records a delivery; withFaults (fault_off.go, or
// fault_inject.go in builds with the faultinject tag) may wrap it.
type recorder interface {
	Record(ctx context.Context, ev dedupe.Event) (dedupe.Recorded, error)
}
