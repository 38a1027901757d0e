//go:build !faultinject

package webhookd

import (
	"log/slog"

	"github.com/redis/go-redis/v9"
)

// withFaults returns rec unchanged: fault injection exists only in builds
// with the faultinject tag (fault_inject.go), which the fault tests use.
func withFaults(rec recorder, _ *slog.Logger) recorder { return rec }

// withRunFaults returns runs unchanged (see withFaults).
func withRunFaults(runs runStore, _ *slog.Logger) runStore { return runs }

// withRedisFaults adds nothing (see withFaults).
func withRedisFaults(redis.UniversalClient, *slog.Logger) {}
