package dedupe_test

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/webhookd/webhookd/dedupe"
)

func TestMarkEnqueued(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	// A history of handed-off events, as a running gateway leaves it: the
	// pending index holds an entry for each, dead once it was marked.
	b.exec(t, `INSERT INTO events (source, external_id, content_type, headers, payload, enqueued_at)
        SELECT 'src', 'old_' || g, 'application/json', '{}', '{}', NULL FROM generate_series(1, 2000) g`)
	b.exec(t, `UPDATE events SET enqueued_at = now() - interval '1 hour'`)
	// Statistics taken when nothing was pending (as after a vacuum on a
	// quiet system) make the pending index look free to scan.
	b.exec(t, `ANALYZE events`)
	var refs []dedupe.EventRef
	for i := range 16 {
		id := fmt.Sprintf("new_%d", i)
		b.recordEvent(t, id)
		refs = append(refs, dedupe.EventRef{Source: "src", ExternalID: id})
	}

	marked := append(refs[:8:8], dedupe.EventRef{Source: "src", ExternalID: "old_1"}, dedupe.EventRef{Source: "src", ExternalID: "missing"})
	err := pgx.BeginFunc(ctx, b.schema.Pool, func(tx pgx.Tx) error {
		if err := dedupe.MarkEnqueued(ctx, tx, marked); err != nil {
			return err
		}
		// The rows are found by key: walking the pending index costs a
		// read of every entry it ever had until vacuum removes them.
		var scans int64
		if err := tx.QueryRow(ctx, `SELECT pg_stat_get_xact_numscans('events_pending_idx'::regclass)`).Scan(&scans); err != nil {
			return err
		}
		if scans != 0 {
			t.Errorf("marking scanned the pending index %d times; want lookups by primary key", scans)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	if n := b.schema.Int(t, `SELECT count(*) FROM events WHERE external_id LIKE 'new_%' AND enqueued_at IS NOT NULL`); n != 8 {
		t.Errorf("%d new events marked, want the 8 given", n)
	}
	if n := b.schema.Int(t, `SELECT count(*) FROM events WHERE external_id = ANY($1) AND enqueued_at IS NULL`,
		[]string{"new_8", "new_9", "new_10", "new_11", "new_12", "new_13", "new_14", "new_15"}); n != 8 {
		t.Errorf("%d of the events not given are still pending, want 8", n)
	}
	if n := b.schema.Int(t, `SELECT count(*) FROM events WHERE external_id = 'old_1' AND enqueued_at < now() - interval '30 minutes'`); n != 1 {
		t.Errorf("an event handed off before had its hand-off time moved")
	}
	pending, err := b.store.PendingCount(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if pending != 8 {
		t.Errorf("pending count %d, want 8", pending)
	}
}
