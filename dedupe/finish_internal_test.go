package dedupe

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/webhookd/webhookd/internal/testkit/pgtest"
)

// markingDB runs mark in its transaction before the first statement
// that completes a logged call: a sweep marking the call 'unknown'
// between the finish's two statements.
type markingDB struct {
	DB
	mark   string
	marked bool
}

func (m *markingDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if sql == finishLoggedSQL && !m.marked {
		m.marked = true
		if _, err := m.DB.Exec(ctx, m.mark); err != nil {
			return pgconn.CommandTag{}, err
		}
	}
	return m.DB.Exec(ctx, sql, args...)
}

// TestFinishCompletesALoggedCallMarkedMeanwhile: a call with a logged
// row (an ordered event's 'calling' row) is completed by the row's ctid
// in a second statement; if a sweep marked the row 'unknown' in between,
// its ctid changed, and the call is completed by its key instead of
// staying 'unknown' (an unknown outcome the audit would count).
func TestFinishCompletesALoggedCallMarkedMeanwhile(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	schema := pgtest.New(t)
	execSQL(t, ctx, schema,
		`INSERT INTO events (source, external_id, payload) VALUES ('src', 'evt_1', '{}')`,
		`INSERT INTO job_runs (key, source, external_id, destination, status, calls, attempts, max_attempts, started_at, lease_until)
		 VALUES ('src:dst:evt_1', 'src', 'evt_1', 'dst', 'running', 1, 0, 5, now(), now() + interval '1 minute')`,
		`INSERT INTO delivery_attempts (key, call, succeeded, duration_ms, state) VALUES ('src:dst:evt_1', 1, false, 0, 'calling')`)
	err := pgx.BeginFunc(ctx, schema.Pool, func(tx pgx.Tx) error {
		db := &markingDB{DB: tx, mark: `UPDATE delivery_attempts SET state = 'unknown' WHERE key = 'src:dst:evt_1'`}
		res, err := finishBatch(ctx, db, []finishRequest{{key: "src:dst:evt_1",
			finish: Finish{Outcome: OutcomeDone, Call: 1, Called: true, StatusCode: 200, Duration: time.Millisecond}}})
		if err == nil && (res[0].err != nil || res[0].finished.Status != StatusDone) {
			t.Errorf("finished %+v, want done", res[0])
		}
		if !db.marked {
			t.Error("the logged call was not completed by its ctid")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	r, err := schema.Pool.Query(ctx, `SELECT call || ':' || state || ':' || COALESCE(outcome, '') || ':' || COALESCE(status_code, 0)
		FROM delivery_attempts WHERE key = 'src:dst:evt_1' ORDER BY id`)
	if err == nil {
		rows, err = pgx.CollectRows(r, pgx.RowTo[string])
	}
	if err != nil || len(rows) != 1 || rows[0] != "1:finished:done:200" {
		t.Fatalf("the call's rows %q, %v; want one, finished with the destination's 200", rows, err)
	}
}
