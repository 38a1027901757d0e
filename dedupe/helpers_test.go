package dedupe_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/testkit/pgtest"
)

// bundle is one test's system under test: a fresh schema and its Store.
type bundle struct {
	schema *pgtest.Schema
	store  *dedupe.Store
}

func setup(t *testing.T) *bundle {
	t.Helper()
	s := pgtest.New(t)
	return &bundle{schema: s, store: dedupe.New(s.Pool)}
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// recordEvent records one event of source "src" with the given id.
func (b *bundle) recordEvent(t *testing.T, id string) {
	t.Helper()
	_, err := dedupe.RecordBatch(testCtx(t), b.schema.Pool, []dedupe.Event{{
		Source: "src", ExternalID: id, ContentType: "application/json", Payload: []byte(`{"id":"` + id + `"}`),
	}})
	if err != nil {
		t.Fatalf("recording event %s: %v", id, err)
	}
}

// claimReq is the claim of event id's key for destination "dst".
func claimReq(id string, maxAttempts int, lease time.Duration) dedupe.ClaimRequest {
	return dedupe.ClaimRequest{
		Key: "src:dst:" + id, Source: "src", ExternalID: id, Destination: "dst",
		Generation: 1, MaxAttempts: maxAttempts, Lease: lease,
	}
}

// run reads a job_runs row.
type runRow struct {
	Status           string
	Attempts, Calls  int
	Permanent        bool
	LastError        *string
	HeldUntil        *time.Time
	LeaseUntil       *time.Time
	CompletedAt      *time.Time
	ResultStatusCode *int
}

func (b *bundle) run(t *testing.T, key string) runRow {
	t.Helper()
	var r runRow
	err := b.schema.Pool.QueryRow(testCtx(t), `
SELECT status, attempts, calls, permanent, last_error, held_until, lease_until, completed_at,
       (result->>'status_code')::int
FROM job_runs WHERE key = $1`, key).Scan(&r.Status, &r.Attempts, &r.Calls, &r.Permanent, &r.LastError,
		&r.HeldUntil, &r.LeaseUntil, &r.CompletedAt, &r.ResultStatusCode)
	if err != nil {
		t.Fatalf("reading run %s: %v", key, err)
	}
	return r
}

func (b *bundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := b.schema.Pool.Exec(testCtx(t), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func mustClaim(t *testing.T, b *bundle, req dedupe.ClaimRequest, want dedupe.ClaimOutcome) dedupe.Claim {
	t.Helper()
	c, err := b.store.Claim(testCtx(t), req)
	if err != nil {
		t.Fatalf("claim %s: %v", req.Key, err)
	}
	if c.Outcome != want {
		t.Fatalf("claim %s: outcome %s (status %s), want %s", req.Key, c.Outcome, c.Status, want)
	}
	return c
}

func mustFinish(t *testing.T, b *bundle, key string, f dedupe.Finish) dedupe.Finished {
	t.Helper()
	out, err := b.store.Finish(testCtx(t), key, f)
	if err != nil {
		t.Fatalf("finish %s (%+v): %v", key, f, err)
	}
	return out
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%03d", prefix, i)
	}
	return out
}

// statDelta returns how much the statistics function stat (such as
// pg_stat_get_numscans) grew for relation rel while fn ran on a pool of
// one connection, so the figure is that backend's.
func (b *bundle) statDelta(t *testing.T, stat, rel string, fn func(*pgxpool.Pool)) int64 {
	t.Helper()
	ctx := testCtx(t)
	cfg, err := pgxpool.ParseConfig(b.schema.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	read := func() int64 {
		var n int64
		if err := pool.QueryRow(ctx, `SELECT `+stat+`($1::regclass)`, rel).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// A backend sends its counts when it goes idle, and at most once a
	// second unless told to.
	flush := func() {
		if _, err := pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
			t.Fatal(err)
		}
	}
	flush()
	before := read()
	fn(pool)
	flush()
	return read() - before
}

// indexScans returns how many times fn's statements scanned index.
func (b *bundle) indexScans(t *testing.T, index string, fn func(*dedupe.Store)) int64 {
	t.Helper()
	return b.statDelta(t, "pg_stat_get_numscans", index, func(p *pgxpool.Pool) { fn(dedupe.New(p)) })
}
