package dedupe

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// HeadRequest asks where an event stands in its entity's order for one
// destination (fifo mode).
type HeadRequest struct {
	Source, Destination, Entity, ExternalID string
	// HoldOnFailure counts a failed or dead run of an earlier event as
	// not settled: the entity waits for it to be replayed.
	HoldOnFailure bool
	// ReorderWindow is how long after it was recorded the event waits
	// for an earlier version that may still arrive (0: none).
	ReorderWindow time.Duration
	// Key and Call name the call its claim is about to make: when the
	// event may go and has no version, Head logs it in
	// delivery_attempts as started (Call 0 logs nothing).
	Key  string
	Call int
}

// Head is an event's place in its entity's order for a destination.
type Head struct {
	// Behind is the earliest event of the entity before this one whose
	// run for the destination is not settled; empty when the event is
	// the entity's head and may be called.
	Behind string
	// Sequence is the event's position in its entity, from 1: the
	// entity's events recorded before it (or of a lower version), plus
	// one.
	Sequence int
	// Wait is how much longer the event, the entity's head, waits for an
	// earlier version that may still arrive (HeadRequest.ReorderWindow);
	// 0 when it may be called now.
	Wait time.Duration
}

// headSQL finds an event's place in its entity: "before" is version
// order when both events carry a version (webhookd_version_cmp, ties by
// the order recorded), else the order recorded. An earlier event counts
// only if the destination is in its plan (or it has no plan), and is
// settled when its latest run for the destination is done, filtered or
// skipped_stale, or failed for good or dead and either skipped by an
// operator (SkipRun) or not holding the entity ($5 false). When the event
// may go now (no earlier one unsettled, its reorder window $6 ms passed)
// and has no version, it logs the call ($8 of key $7) about to be made as
// 'calling', as the version guard does for a versioned one: a sweep marks
// it 'unknown' if the worker stops before the outcome, so the audit
// counts the call.
const headSQL = `
WITH cur AS (
    SELECT received_at, external_id, order_version FROM events WHERE source = $1 AND external_id = $4
), earlier AS (
    SELECT p.external_id, p.received_at, p.plan
    FROM events p, cur
    WHERE p.source = $1 AND p.order_entity = $3 AND p.external_id <> cur.external_id
      AND CASE WHEN NULLIF(p.order_version, '') IS NOT NULL AND NULLIF(cur.order_version, '') IS NOT NULL
                    AND webhookd_version_cmp(p.order_version, cur.order_version) <> 0
               THEN webhookd_version_cmp(p.order_version, cur.order_version) < 0
               ELSE (p.received_at, p.external_id) < (cur.received_at, cur.external_id) END
), head AS MATERIALIZED (
    SELECT (SELECT e.external_id FROM earlier e
            WHERE (e.plan IS NULL OR $2 = ANY (e.plan))
              AND NOT COALESCE((SELECT r.status IN ('done', 'filtered', 'skipped_stale')
                                       OR ((NOT $5 OR r.skipped_at IS NOT NULL)
                                           AND (r.status = 'dead' OR (r.status = 'failed' AND r.permanent)))
                                FROM job_runs r
                                WHERE r.source = $1 AND r.external_id = e.external_id AND r.destination = $2
                                ORDER BY r.generation DESC LIMIT 1), false)
            ORDER BY e.received_at, e.external_id LIMIT 1) AS behind,
           (SELECT count(*) + 1 FROM earlier) AS sequence,
           (SELECT GREATEST(ceil(EXTRACT(EPOCH FROM received_at + $6 * interval '1 millisecond' - now()) * 1000), 0)::bigint
            FROM cur) AS wait_ms
), started AS (
    INSERT INTO delivery_attempts (key, call, succeeded, duration_ms, state)
    SELECT $7, $8, false, 0, 'calling' FROM head, cur
    WHERE $8 > 0 AND head.behind IS NULL AND head.wait_ms = 0 AND NULLIF(cur.order_version, '') IS NULL
)
SELECT behind, sequence, wait_ms FROM head`

// Head returns where r's event stands in its entity's order for r's
// destination: the event it waits behind, if any, its sequence, and, as
// the head, how long it still waits for its reorder window. When the
// event may go now it logs r.Call as started (see HeadRequest.Key).
func (s *Store) Head(ctx context.Context, r HeadRequest) (Head, error) {
	var h Head
	var behind *string
	var waitMS *int64
	if err := s.pool.QueryRow(ctx, headSQL, r.Source, r.Destination, r.Entity, r.ExternalID, r.HoldOnFailure,
		r.ReorderWindow.Milliseconds(), r.Key, r.Call).Scan(&behind, &h.Sequence, &waitMS); err != nil {
		return Head{}, fmt.Errorf("error finding the head of entity %s: %w", r.Entity, err)
	}
	if behind != nil {
		h.Behind = *behind
	}
	if waitMS != nil && behind == nil {
		h.Wait = time.Duration(*waitMS) * time.Millisecond
	}
	return h, nil
}

// skipRunSQL records an operator's skip of a run that ended failed for
// good or dead; any other run is left alone. The status stays: the event
// was not delivered, and a replay still may deliver it.
const skipRunSQL = `
UPDATE job_runs SET
    skipped_at = now(),
    skipped_by = NULLIF($2, ''),
    skip_reason = NULLIF($3, '')
WHERE key = $1 AND (status = 'dead' OR (status = 'failed' AND permanent))
RETURNING ` + runColumns

// SkipRun lets the entity of key's event go on past it (fifo with
// on_failure hold): the run, failed for good or dead, is recorded as
// skipped by by for reason, and Head counts it settled from then on, so
// the entity's later events are called, in order. It reports false, and
// changes nothing, when the run is in any other state (it may still
// succeed, or a replay reopened it); it returns ErrNotFound when there is
// no run, and ErrTooSlow past AdminStatementTimeout.
func (s *Store) SkipRun(ctx context.Context, key, by, reason string) (Run, bool, error) {
	run, skipped, err := s.changeRun(ctx, skipRunSQL, key, by, reason)
	if err != nil {
		return Run{}, false, fmt.Errorf("error skipping run: %w", err)
	}
	return run, skipped, nil
}

// OrderHoldPrefix begins the hold reason of a run that waits behind an
// earlier event of its entity, followed by that event's id (the fifo
// guard in jobs writes it; HeldEntities reads it).
const OrderHoldPrefix = "order: waiting behind "

// HeldEntity is an entity whose events wait, on one destination, behind
// an earlier event that is not settled (fifo).
type HeldEntity struct {
	Source      string
	Destination string
	Entity      string
	// Behind is the event the entity waits behind, and BehindStatus its
	// run's status as shown (retrying, failed, dead, running, …; empty
	// when it has no run yet).
	Behind       string
	BehindStatus string
	// Waiting counts the entity's events held behind it.
	Waiting int
	// Since is when the oldest of those waiting runs was created.
	Since time.Time
}

// heldEntitiesSQL groups the runs held by order (running, held_until
// set, the guard's reason) by destination and entity, oldest wait first,
// with the status of the run each waits behind.
const heldEntitiesSQL = `
SELECT h.source, h.destination, h.entity, h.behind, COALESCE(b.shown, ''), h.waiting, h.since
FROM (
    SELECT r.source, r.destination, e.order_entity AS entity,
           substr((array_agg(r.hold_reason ORDER BY e.received_at, e.external_id))[1], length($1) + 1) AS behind,
           count(*)::int AS waiting, min(r.created_at) AS since
    FROM job_runs r
    JOIN events e ON e.source = r.source AND e.external_id = r.external_id
    WHERE r.status = 'running' AND r.held_until IS NOT NULL AND starts_with(r.hold_reason, $1)
      AND ($2 = '' OR r.source = $2) AND ($3 = '' OR r.destination = $3)
      AND e.order_entity IS NOT NULL
    GROUP BY r.source, r.destination, e.order_entity
    ORDER BY since, 1, 2, 3
    LIMIT $4
) h
LEFT JOIN LATERAL (
    SELECT webhookd_run_status(x.status, x.permanent, x.attempts, x.held_until) AS shown
    FROM job_runs x
    WHERE x.source = h.source AND x.external_id = h.behind AND x.destination = h.destination
    ORDER BY x.generation DESC LIMIT 1
) b ON true
ORDER BY h.since, h.source, h.destination, h.entity`

// HeldEntities returns the entities held by order (fifo), oldest wait
// first, at most limit, of source and destination when they are not
// empty. It returns ErrTooSlow past AdminStatementTimeout.
func (s *Store) HeldEntities(ctx context.Context, source, destination string, limit int) ([]HeldEntity, error) {
	var out []HeldEntity
	err := s.adminTx(ctx, false, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, heldEntitiesSQL, OrderHoldPrefix, source, destination, limit)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (HeldEntity, error) {
			var h HeldEntity
			err := row.Scan(&h.Source, &h.Destination, &h.Entity, &h.Behind, &h.BehindStatus, &h.Waiting, &h.Since)
			return h, err
		})
		return err
	})
	if err != nil {
		if errors.Is(err, ErrTooSlow) {
			return nil, err
		}
		return nil, fmt.Errorf("error listing held entities: %w", err)
	}
	return out, nil
}

// OrderWait counts the runs of one destination held by order (fifo).
type OrderWait struct {
	Source, Destination string
	// Waiting counts the runs held behind an earlier event of their
	// entity; Oldest is how long the oldest of them has waited (since
	// its run was created).
	Waiting int
	Oldest  time.Duration
}

// orderWaitsSQL counts the runs held by order per destination.
const orderWaitsSQL = `
SELECT source, destination, count(*)::int, (EXTRACT(EPOCH FROM now() - min(created_at)) * 1000)::bigint
FROM job_runs
WHERE status = 'running' AND held_until IS NOT NULL AND starts_with(hold_reason, $1)
GROUP BY source, destination`

// OrderWaits counts, per destination with any, the runs held behind an
// earlier event of their entity (fifo), and the oldest one's wait, for
// the metrics.
func (s *Store) OrderWaits(ctx context.Context) ([]OrderWait, error) {
	rows, err := s.pool.Query(ctx, orderWaitsSQL, OrderHoldPrefix)
	if err != nil {
		return nil, fmt.Errorf("error counting runs held by order: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (OrderWait, error) {
		var w OrderWait
		var ms int64
		err := row.Scan(&w.Source, &w.Destination, &w.Waiting, &ms)
		w.Oldest = time.Duration(ms) * time.Millisecond
		return w, err
	})
	if err != nil {
		return nil, fmt.Errorf("error counting runs held by order: %w", err)
	}
	return out, nil
}

// releaseBehindSQL ends the holds of an entity's runs held on a
// destination behind one event (their hold reason names it), found by
// the entity's index: their claim may take them now.
const releaseBehindSQL = `
UPDATE job_runs r SET held_until = now(), retry_at = now()
FROM events e
WHERE e.source = $1 AND e.order_entity = $3
  AND r.source = e.source AND r.external_id = e.external_id AND r.destination = $2
  AND r.status = 'running' AND r.hold_reason = $4 AND r.held_until > now()
RETURNING r.key`

// ReleaseBehind ends the holds of the runs of entity held on destination
// behind event externalID (fifo), once it settled, and returns their
// keys, so their tasks can be woken: the next one is called now instead
// of at its next poll.
func (s *Store) ReleaseBehind(ctx context.Context, source, destination, entity, externalID string) ([]string, error) {
	rows, err := s.pool.Query(ctx, releaseBehindSQL, source, destination, entity, OrderHoldPrefix+externalID)
	if err != nil {
		return nil, fmt.Errorf("error releasing the events behind %s: %w", externalID, err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("error releasing the events behind %s: %w", externalID, err)
	}
	return keys, nil
}
