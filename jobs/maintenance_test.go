package jobs_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/jobs"
)

func TestMaintenance(t *testing.T) {
	t.Parallel()
	b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: "http://127.0.0.1:1"}})
	ctx := testCtx(t)
	exec := func(sql string) {
		t.Helper()
		if _, err := b.schema.Pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	b.record(t, "old", body)
	b.record(t, "new", body)
	exec(`UPDATE events SET received_at = now() - interval '2 hours', last_received_at = now() - interval '2 hours' WHERE external_id = 'old'`)
	exec(`INSERT INTO delivery_attempts (key, call, status_code, succeeded, duration_ms) VALUES
        ('src:dst:twice', 1, 200, true, 1), ('src:dst:twice', 2, 200, true, 1)`)

	reg := prometheus.NewRegistry()
	m := jobs.NewMaintenance(b.store, jobs.MaintenanceConfig{
		Retention: time.Hour, RetentionInterval: 100 * time.Millisecond, DuplicateCheckInterval: 100 * time.Millisecond,
		Logger: testLogger(t), Metrics: jobs.NewMetrics(reg),
	})
	before := time.Now()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); m.Run(runCtx) }()
	pipelinetest.Eventually(t, 10*time.Second, "a retention run and a duplicate check", func() bool {
		return metricValue(t, reg, "webhookd_maintenance_runs_total", "job", dedupe.KindRetention) >= 2 &&
			metricValue(t, reg, "webhookd_maintenance_runs_total", "job", dedupe.KindDuplicateCheck) >= 2
	})
	stop()
	<-done

	if n := b.schema.Int(t, `SELECT count(*) FROM events`); n != 1 {
		t.Fatalf("%d events left, want only the new one", n)
	}
	if v := metricValue(t, reg, "webhookd_retention_rows_deleted_total", "table", "events"); v != 1 {
		t.Fatalf("rows deleted metric %v, want 1", v)
	}
	last := metricValue(t, reg, "webhookd_retention_last_success_timestamp_seconds", "", "")
	if last < float64(before.Unix()) {
		t.Fatalf("retention last success %v, want after %d", last, before.Unix())
	}
	if v := metricValue(t, reg, "webhookd_duplicate_keys", "", ""); v != 1 {
		t.Fatalf("duplicate keys metric %v, want 1", v)
	}
	if n := b.schema.Int(t, `SELECT count(*) FROM maintenance_runs WHERE kind = 'duplicate_check' AND found = 1`); n < 1 {
		t.Fatalf("duplicate check runs not recorded")
	}

	// A restarted process reads the last success from the database. Its
	// own retention run is kept out (another replica holds the lock), so
	// the figure can only come from the recorded run.
	conn, err := b.schema.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1, hashtext(current_schema()))`, int32(0x77656202)); err != nil {
		t.Fatal(err)
	}
	var recorded float64
	if err := b.schema.Pool.QueryRow(ctx, `SELECT extract(epoch FROM max(finished_at))::float8 FROM maintenance_runs
        WHERE kind = 'retention' AND error IS NULL`).Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	reg2 := prometheus.NewRegistry()
	m2 := jobs.NewMaintenance(b.store, jobs.MaintenanceConfig{
		Retention: time.Hour, RetentionInterval: time.Hour, DuplicateCheckInterval: time.Hour,
		Logger: testLogger(t), Metrics: jobs.NewMetrics(reg2),
	})
	runCtx2, stop2 := context.WithTimeout(ctx, 500*time.Millisecond)
	defer stop2()
	m2.Run(runCtx2)
	if v := metricValue(t, reg2, "webhookd_retention_last_success_timestamp_seconds", "", ""); math.Abs(v-recorded) > 0.001 {
		t.Fatalf("restored last success %v, want the recorded run's %v", v, recorded)
	}
}
