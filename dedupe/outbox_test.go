package dedupe_test

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhookd/webhookd/dedupe"
)

func TestSettleEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	// A history of handed-off events, as a running gateway leaves it: the
	// outbox is full of dead rows until vacuum (a few hundred pages of
	// them here; while it is a few pages a scan is as cheap as lookups).
	b.exec(t, `INSERT INTO events (source, external_id, content_type, headers, payload)
        SELECT 'src', 'old_' || g, 'application/json', '{}', '{}' FROM generate_series(1, 30000) g`)
	b.exec(t, `INSERT INTO event_outbox (source, external_id) SELECT source, external_id FROM events`)
	b.exec(t, `DELETE FROM event_outbox`)
	// Statistics taken when nothing was pending (as after a vacuum on a
	// quiet system) make the outbox look free to scan whole.
	b.exec(t, `ANALYZE event_outbox`)
	var refs []dedupe.EventRef
	for i := range 16 {
		id := fmt.Sprintf("new_%d", i)
		b.recordEvent(t, id)
		refs = append(refs, dedupe.EventRef{Source: "src", ExternalID: id})
	}
	if n := b.schema.Int(t, `SELECT count(*) FROM event_outbox`); n != 16 {
		t.Fatalf("%d events in the outbox after recording 16", n)
	}

	settled := append(refs[:8:8], dedupe.EventRef{Source: "src", ExternalID: "old_1"}, dedupe.EventRef{Source: "src", ExternalID: "missing"})
	// The rows are found by key: a scan of the outbox, or of its primary
	// key's range, reads every row it ever had until vacuum removes them.
	read := b.statDelta(t, "pg_stat_get_blocks_fetched", "event_outbox", func(p *pgxpool.Pool) {
		if err := dedupe.New(p).SettleEvents(ctx, settled); err != nil {
			t.Fatal(err)
		}
	})
	if read > 10*int64(len(settled)) {
		t.Errorf("settling %d events read %d blocks of the outbox; want a few lookups by primary key each", len(settled), read)
	}

	if n := b.schema.Int(t, `SELECT count(*) FROM event_outbox WHERE external_id = ANY($1)`,
		[]string{"new_0", "new_1", "new_2", "new_3", "new_4", "new_5", "new_6", "new_7"}); n != 0 {
		t.Errorf("%d of the 8 events settled are still in the outbox", n)
	}
	if n := b.schema.Int(t, `SELECT count(*) FROM event_outbox WHERE external_id = ANY($1)`,
		[]string{"new_8", "new_9", "new_10", "new_11", "new_12", "new_13", "new_14", "new_15"}); n != 8 {
		t.Errorf("%d of the events not given are still pending, want 8", n)
	}
	if n := b.schema.Int(t, `SELECT count(*) FROM events`); n != 30016 {
		t.Errorf("%d events stored, want all 30016: settling touches only the outbox", n)
	}
	pending, err := b.store.PendingCount(ctx, []string{"src"})
	if err != nil {
		t.Fatal(err)
	}
	if pending != 8 {
		t.Errorf("pending count %d, want 8", pending)
	}
}
