package webhookd

import (
	"context"

	"github.com/webhookd/webhookd/dedupe"
)

// Fault injection for the fault tests: withFaults, withRunFaults and
// withRedisFaults (faults_off.go, or faults_inject.go in builds with the
// faultinject tag) may wrap the recorder, the run store and the Redis
// client with the fault WEBHOOKD_FAULT names.

// runStore is what the deliver handler needs from dedupe; withRunFaults
// may wrap it.
type runStore interface {
	Claim(ctx context.Context, req dedupe.ClaimRequest) (dedupe.Claim, error)
	Finish(ctx context.Context, key string, f dedupe.Finish) (dedupe.Finished, error)
	AdvanceVersion(ctx context.Context, r dedupe.VersionRequest) (dedupe.Version, error)
	ReleaseVersion(ctx context.Context, r dedupe.VersionRequest) error
	Head(ctx context.Context, r dedupe.HeadRequest) (dedupe.Head, error)
	EventContent(ctx context.Context, source, externalID string) (headers, payload []byte, err error)
	ReleaseBehind(ctx context.Context, source, destination, entity, externalID string) ([]string, error)
}
