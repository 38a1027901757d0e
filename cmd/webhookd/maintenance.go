package main

import (
	"context"

	"github.com/webhookd/webhookd/jobs"
)

// runMaintenance runs the scheduled jobs (retention, once across replicas;
// the duplicate check) until ctx ends. Intervals come from
// worker.retention_interval and worker.duplicate_check_interval.
func runMaintenance(ctx context.Context, a *app) {
	jobs.NewMaintenance(a.store, jobs.MaintenanceConfig{
		Retention:              a.cfg.Retention.std(),
		RetentionInterval:      a.cfg.Worker.RetentionEvery.std(),
		DuplicateCheckInterval: a.cfg.Worker.DuplicateCheckEvery.std(),
		Logger:                 a.log,
		Metrics:                a.metrics,
	}).Run(ctx)
}
