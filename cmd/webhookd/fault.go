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

// runStore is what the deliver handler needs from dedupe; withRunFaults
// (fault_off.go, or fault_inject.go in builds with the faultinject tag)
// may wrap it.
type runStore interface {
	Claim(ctx context.Context, req dedupe.ClaimRequest) (dedupe.Claim, error)
	Finish(ctx context.Context, key string, f dedupe.Finish) (dedupe.Finished, error)
	AdvanceVersion(ctx context.Context, r dedupe.VersionRequest) (dedupe.Version, error)
	ReleaseVersion(ctx context.Context, r dedupe.VersionRequest) error
}
