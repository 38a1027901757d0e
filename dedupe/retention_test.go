package dedupe_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dedupe"
)

func TestRetention(t *testing.T) {
	t.Parallel()

	t.Run("DeletesOldRowsInBatchesKeepsNewOnes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		old, fresh := ids("old", 11), ids("new", 4)
		for _, id := range append(append([]string{}, old...), fresh...) {
			b.recordEvent(t, id)
			c := mustClaim(t, b, claimReq(id, 5, time.Minute), dedupe.Claimed)
			mustFinish(t, b, "src:dst:"+id, dedupe.Finish{Outcome: dedupe.OutcomeDone, Call: c.Call, Called: true, StatusCode: 200, Result: []byte(`{}`)})
		}
		// An old event still being worked on, and one a sender redelivered
		// recently: both stay.
		b.recordEvent(t, "old_running")
		mustClaim(t, b, claimReq("old_running", 5, time.Minute), dedupe.Claimed)
		b.recordEvent(t, "old_redelivered")
		b.recordEvent(t, "old_redelivered") // counted in event_repeats, as of now
		b.recordEvent(t, "old000")          // a repeat long ago: its count goes with it
		b.exec(t, `UPDATE events SET received_at = now() - interval '40 days', last_received_at = now() - interval '40 days'
            WHERE external_id LIKE 'old%'`)
		b.exec(t, `UPDATE event_repeats SET last_received_at = now() - interval '35 days' WHERE external_id = 'old000'`)
		b.exec(t, `UPDATE job_runs SET created_at = now() - interval '40 days', completed_at = now() - interval '40 days'
            WHERE external_id LIKE 'old%'`)
		b.exec(t, `UPDATE delivery_attempts SET created_at = now() - interval '40 days' WHERE key LIKE 'src:dst:old%'`)
		b.exec(t, `INSERT INTO entity_versions (source, destination, entity, version, key, updated_at)
            VALUES ('src', 'dst', 'cus_1', '5', 'src:dst:old000', now() - interval '40 days')`)

		// Signed content digests: one whose window ended before the
		// cutoff goes, one that ended since and a live one stay.
		b.exec(t, `INSERT INTO event_digests (source, digest, external_id, expires_at) VALUES
            ('src', 'ancient', 'old000', now() - interval '31 days'),
            ('src', 'ended', 'new000', now() - interval '1 day'),
            ('src', 'live', 'new001', now() + interval '1 day')`)
		res, err := b.store.RunRetention(testCtx(t), dedupe.RetentionOptions{Retention: 30 * 24 * time.Hour, BatchSize: 4})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Ran || res.Events != 11 || res.Runs != 11 || res.Attempts != 11 || res.Digests != 1 {
			t.Fatalf("result %+v, want 11 events, runs and attempts and 1 digest deleted", res)
		}
		// 11 rows in batches of 4 take 3 statements per table (4, 4, 3).
		if res.Batches < 9 {
			t.Fatalf("%d batches, want at least 9 (bounded batches)", res.Batches)
		}
		if n := b.schema.Int(t, `SELECT count(*) FROM events`); n != 6 {
			t.Fatalf("%d events left, want 4 new + old_running + old_redelivered", n)
		}
		if n := b.schema.Int(t, `SELECT count(*) FROM events WHERE external_id IN ('old_running', 'old_redelivered')`); n != 2 {
			t.Fatalf("the running and the redelivered event were deleted")
		}
		if n := b.schema.Int(t, `SELECT count(*) FROM event_repeats WHERE external_id <> 'old_redelivered'`); n != 0 {
			t.Fatalf("%d repeat counts of deleted events left", n)
		}
		// None of these events was handed off: a deleted one's outbox row
		// goes with it, so the relay never enqueues an event that is gone.
		if n := b.schema.Int(t, `SELECT count(*) FROM event_outbox o
            WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.source = o.source AND e.external_id = o.external_id)`); n != 0 {
			t.Fatalf("%d outbox rows of deleted events left", n)
		}
		if n := b.schema.Int(t, `SELECT count(*) FROM event_outbox`); n != 6 {
			t.Fatalf("%d outbox rows left, want the 6 kept events'", n)
		}
		if n := b.schema.Int(t, `SELECT count(*) FROM job_runs WHERE external_id LIKE 'new%'`); n != 4 {
			t.Fatalf("%d new runs left, want 4", n)
		}
		if n := b.schema.Int(t, `SELECT count(*) FROM delivery_attempts`); n != 4 {
			t.Fatalf("%d logged calls left, want the 4 new ones (old_running's call in flight has no row yet)", n)
		}
		if n := b.schema.Int(t, `SELECT count(*) FROM entity_versions`); n != 1 {
			t.Fatalf("entity versions were deleted; they guard ordering")
		}
		last, err := b.store.LastMaintenance(testCtx(t), dedupe.KindRetention)
		if err != nil {
			t.Fatal(err)
		}
		if last.RowsDeleted != res.Total() || last.Error != "" || last.FinishedAt.Before(last.StartedAt) || time.Since(last.FinishedAt) > time.Minute {
			t.Fatalf("last run %+v, want the run just made (%d rows)", last, res.Total())
		}
		// A second run finds nothing and is recorded too.
		again, err := b.store.RunRetention(testCtx(t), dedupe.RetentionOptions{Retention: 30 * 24 * time.Hour, BatchSize: 4})
		if err != nil || again.Total() != 0 {
			t.Fatalf("second run %+v, %v", again, err)
		}
		if n := b.schema.Int(t, `SELECT count(*) FROM maintenance_runs WHERE kind = 'retention'`); n != 2 {
			t.Fatalf("%d recorded runs, want 2", n)
		}
	})

	t.Run("EndedIssuesGoOpenOnesStay", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := testCtx(t)
		for i, d := range []string{"ended_old", "ended_new", "open_old"} {
			if _, err := b.store.RecordIssueFailure(ctx, dedupe.IssueFailure{Source: "src", Destination: d, Cause: "500", ExternalIDs: []string{fmt.Sprint("evt_", i)}}); err != nil {
				t.Fatal(err)
			}
		}
		b.exec(t, `UPDATE issues SET state = 'closed', ended_at = now() WHERE destination LIKE 'ended%'`)
		b.exec(t, `UPDATE issues SET first_seen = now() - interval '40 days', last_seen = now() - interval '40 days' WHERE destination LIKE '%old'`)
		b.exec(t, `UPDATE issues SET ended_at = now() - interval '40 days' WHERE destination = 'ended_old'`)
		res, err := b.store.RunRetention(ctx, dedupe.RetentionOptions{Retention: 30 * 24 * time.Hour})
		if err != nil || res.Issues != 1 {
			t.Fatalf("result %+v, %v; want 1 issue deleted", res, err)
		}
		if n := b.schema.Int(t, `SELECT count(*) FROM issues WHERE destination IN ('ended_new', 'open_old')`); n != 2 {
			t.Fatalf("%d of the recent and the open issue left, want 2", n)
		}
		if n := b.schema.Int(t, `SELECT count(*) FROM issue_events`); n != 2 {
			t.Fatalf("%d issue events left, want the 2 kept issues'", n)
		}
	})

	t.Run("OnceAcrossReplicas", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := testCtx(t)
		// Another replica holds the lock for the length of its run.
		conn, err := b.schema.Pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		b.exec(t, `SELECT 1`)
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1, hashtext(current_schema()))`, int32(0x77656202)); err != nil {
			t.Fatal(err)
		}
		res, err := b.store.RunRetention(ctx, dedupe.RetentionOptions{Retention: time.Hour})
		if err != nil || res.Ran {
			t.Fatalf("run while another replica holds the lock: %+v, %v; want skipped", res, err)
		}
		if n := b.schema.Int(t, `SELECT count(*) FROM maintenance_runs`); n != 0 {
			t.Fatalf("a skipped run was recorded")
		}
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1, hashtext(current_schema()))`, int32(0x77656202)); err != nil {
			t.Fatal(err)
		}
		if res, err := b.store.RunRetention(ctx, dedupe.RetentionOptions{Retention: time.Hour}); err != nil || !res.Ran {
			t.Fatalf("run after release: %+v, %v; want ran", res, err)
		}
	})

	t.Run("LastMaintenanceIgnoresFailures", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := testCtx(t)
		if _, err := b.store.LastMaintenance(ctx, dedupe.KindRetention); !errors.Is(err, dedupe.ErrNotFound) {
			t.Fatalf("never run: %v, want ErrNotFound", err)
		}
		ok := dedupe.MaintenanceRun{Kind: dedupe.KindRetention, StartedAt: time.Now().Add(-time.Minute), RowsDeleted: 7}
		if err := b.store.RecordMaintenance(ctx, ok); err != nil {
			t.Fatal(err)
		}
		if err := b.store.RecordMaintenance(ctx, dedupe.MaintenanceRun{Kind: dedupe.KindRetention, Error: "boom"}); err != nil {
			t.Fatal(err)
		}
		last, err := b.store.LastMaintenance(ctx, dedupe.KindRetention)
		if err != nil || last.RowsDeleted != 7 {
			t.Fatalf("last success %+v, %v; want the run with 7 rows", last, err)
		}
	})
}
