package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/jobs"
	"github.com/webhookd/webhookd/migrations"
)

// prepareDatabase makes the database ready: created afresh (or reset for
// reuse) when asked, and migrated. cleanup drops a database it created.
func prepareDatabase(ctx context.Context, cfg Config) (cleanup func(), err error) {
	cleanup = func() {}
	if cfg.FreshDatabase {
		cc, err := pgx.ParseConfig(cfg.DatabaseURL)
		if err != nil {
			return cleanup, fmt.Errorf("error parsing database url: %w", err)
		}
		name := cc.Database
		ident := pgx.Identifier{name}.Sanitize()
		cc.Database = "postgres"
		admin := func(ctx context.Context, fn func(*pgx.Conn) error) error {
			conn, err := pgx.ConnectConfig(ctx, cc)
			if err != nil {
				return fmt.Errorf("error connecting to the postgres database: %w", err)
			}
			defer conn.Close(context.WithoutCancel(ctx))
			return fn(conn)
		}
		err = admin(ctx, func(conn *pgx.Conn) error {
			var exists bool
			if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
				return err
			}
			if exists && cfg.ReuseDatabase {
				return nil
			}
			if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
				return fmt.Errorf("error dropping database %s: %w", name, err)
			}
			if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
				return fmt.Errorf("error creating database %s: %w", name, err)
			}
			return nil
		})
		if err != nil {
			return cleanup, err
		}
		if !cfg.KeepDatabase {
			cleanup = func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				err := admin(ctx, func(conn *pgx.Conn) error {
					_, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)")
					return err
				})
				if err != nil {
					cfg.Log.Warn("could not drop the bench database", "database", name, "error", err.Error())
				}
			}
		}
	}
	if _, err := migrations.Up(ctx, cfg.DatabaseURL); err != nil {
		return cleanup, err
	}
	return cleanup, nil
}

// resetForReuse removes what earlier runs left besides the preload.
func resetForReuse(ctx context.Context, pool *pgxpool.Pool, source string) error {
	steps := []struct {
		sql  string
		args []any
	}{
		{`TRUNCATE entity_versions`, nil},
		{`DELETE FROM job_runs WHERE source <> $1 OR external_id NOT LIKE 'evt\_pre\_%'`, []any{source}},
		{`DELETE FROM delivery_attempts WHERE key NOT LIKE $1 || ':%:evt\_pre\_%'`, []any{source}},
		{`DELETE FROM event_outbox WHERE source <> $1 OR external_id NOT LIKE 'evt\_pre\_%'`, []any{source}},
		{`DELETE FROM event_handoffs WHERE record_xid NOT IN (SELECT record_xid FROM event_outbox WHERE record_xid IS NOT NULL)`, nil},
		{`DELETE FROM events WHERE source <> $1 OR external_id NOT LIKE 'evt\_pre\_%'`, []any{source}},
		{`UPDATE events SET deliveries = 1, last_received_at = received_at WHERE deliveries <> 1`, nil},
		{`TRUNCATE event_repeats`, nil},
	}
	for _, st := range steps {
		if _, err := pool.Exec(ctx, st.sql, st.args...); err != nil {
			return fmt.Errorf("error resetting the reused database: %w", err)
		}
	}
	_, err := pool.Exec(ctx, `VACUUM (ANALYZE) events, event_repeats, job_runs, delivery_attempts, event_outbox, event_handoffs`)
	return err
}

// clearQueue deletes queue and its tasks through Asynq's inspector. A
// queue with tasks still active (a worker of an earlier run still holds
// them) is an error: stop that worker first.
func clearQueue(ctx context.Context, redisURL, queue string) error {
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		return fmt.Errorf("error parsing redis url: %w", err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	insp := asynq.NewInspectorFromRedisClient(rdb)
	if err := insp.DeleteQueue(queue, true); err != nil && !errors.Is(err, asynq.ErrQueueNotFound) {
		return fmt.Errorf("error deleting queue %s: %w", queue, err)
	}
	return nil
}

// preloaded returns how many preloaded events (evt_pre_<0..n-1>) of
// source a kept database holds, by binary search on the primary key.
func preloaded(ctx context.Context, pool *pgxpool.Pool, source string) (int64, error) {
	exists := func(n int64) (bool, error) {
		var ok bool
		err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM events WHERE source = $1 AND external_id = $2)`,
			source, preloadID(n)).Scan(&ok)
		return ok, err
	}
	// The answer lies in [lo, hi): evt_pre_<lo-1> exists, evt_pre_<hi-1> does not.
	lo, hi := int64(0), int64(1)
	for {
		ok, err := exists(hi - 1)
		if err != nil {
			return 0, fmt.Errorf("error counting preloaded events: %w", err)
		}
		if !ok {
			break
		}
		lo, hi = hi, hi*2
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		ok, err := exists(mid - 1)
		if err != nil {
			return 0, fmt.Errorf("error counting preloaded events: %w", err)
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// preload inserts events evt_pre_<0..n-1> of src with COPY as finished
// history: each event handed off, its run done and its one successful
// destination call logged, as production would have them (so neither the
// relay nor the queue-loss check takes them up again), unless an earlier
// run left exactly those. It then vacuums, analyzes and checkpoints, so
// the measured run does not pay for the load.
func preload(ctx context.Context, pool *pgxpool.Pool, src Source, n int64, bodySize int, progress io.Writer) error {
	source := src.Name
	var last, beyond bool
	err := pool.QueryRow(ctx, `SELECT
        EXISTS (SELECT 1 FROM events WHERE source = $1 AND external_id = $2),
        EXISTS (SELECT 1 FROM events WHERE source = $1 AND external_id = $3)`,
		source, preloadID(n-1), preloadID(n)).Scan(&last, &beyond)
	if err != nil {
		return fmt.Errorf("error checking the preload: %w", err)
	}
	if last && !beyond {
		return nil
	}
	for _, q := range []string{
		`DELETE FROM events WHERE source = $1 AND external_id LIKE 'evt\_pre\_%'`,
		`DELETE FROM job_runs WHERE source = $1 AND external_id LIKE 'evt\_pre\_%'`,
		`DELETE FROM delivery_attempts WHERE key LIKE $1 || ':%:evt\_pre\_%'`,
	} {
		if _, err := pool.Exec(ctx, q, source); err != nil {
			return fmt.Errorf("error removing an old preload: %w", err)
		}
	}

	var done atomic.Int64
	stop := make(chan struct{})
	var bars sync.WaitGroup
	if progress != nil {
		bars.Add(1)
		go func() {
			defer bars.Done()
			bar := newBar(progress, n, "preloading events")
			tick := time.NewTicker(250 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					_ = bar.Set64(done.Load())
					_ = bar.Finish()
					_, _ = fmt.Fprintln(progress)
					return
				case <-tick.C:
					_ = bar.Set64(done.Load())
				}
			}
		}()
	}
	headers := []byte(`{"Content-Type":["application/json"]}`)
	now := time.Now()
	const streams = 2
	errs := make(chan error, streams)
	per := (n + streams - 1) / streams
	result := []byte(`{"status_code":200,"headers":{"Content-Type":"application/json"},"body":"{\"ok\":true}"}`)
	for s := range int64(streams) {
		from, to := s*per, min((s+1)*per, n)
		go func() {
			i := from
			_, err := pool.CopyFrom(ctx, pgx.Identifier{"events"},
				[]string{"source", "external_id", "content_type", "headers", "payload", "received_at", "last_received_at"},
				pgx.CopyFromFunc(func() ([]any, error) {
					if i >= to {
						return nil, nil
					}
					id := preloadID(i)
					row := []any{source, id, "application/json", headers, makeBody(id, i, bodySize), now, now}
					i++
					if i%1000 == 0 {
						done.Add(1000)
					}
					return row, nil
				}))
			errs <- err
		}()
		go func() {
			i := from
			_, err := pool.CopyFrom(ctx, pgx.Identifier{"job_runs"},
				[]string{"key", "source", "external_id", "destination", "generation", "status", "attempts", "calls",
					"max_attempts", "result", "created_at", "started_at", "completed_at"},
				pgx.CopyFromFunc(func() ([]any, error) {
					if i >= to {
						return nil, nil
					}
					id := preloadID(i)
					i++
					return []any{jobs.Key(source, src.Destination, id, 1), source, id, src.Destination, 1, "done", 0, 1,
						20, result, now, now, now}, nil
				}))
			errs <- err
		}()
		go func() {
			i := from
			_, err := pool.CopyFrom(ctx, pgx.Identifier{"delivery_attempts"},
				[]string{"key", "call", "status_code", "succeeded", "duration_ms", "created_at"},
				pgx.CopyFromFunc(func() ([]any, error) {
					if i >= to {
						return nil, nil
					}
					key := jobs.Key(source, src.Destination, preloadID(i), 1)
					i++
					return []any{key, 1, 200, true, 1.0, now}, nil
				}))
			errs <- err
		}()
	}
	for range 3 * streams {
		if e := <-errs; e != nil && err == nil {
			err = fmt.Errorf("error preloading events: %w", e)
		}
	}
	done.Store(n)
	close(stop)
	bars.Wait()
	if err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, `VACUUM (ANALYZE) events, event_repeats, job_runs, delivery_attempts, event_outbox`); err != nil {
		return fmt.Errorf("error vacuuming after the preload: %w", err)
	}
	_, _ = pool.Exec(ctx, `CHECKPOINT`) // needs superuser; best effort
	return nil
}
