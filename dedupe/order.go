package dedupe

import (
	"context"
	"fmt"
	"time"
)

// VersionOutcome says what the ordering guard decided for one call.
type VersionOutcome int

const (
	// VersionFresh means the version is not older than any forwarded for
	// the entity: it is now recorded as the newest, and the caller holds
	// the entity until it calls [Store.ReleaseVersion] (or the hold
	// passes). Forward it.
	VersionFresh VersionOutcome = iota + 1
	// VersionStale means a newer version was already forwarded (or is
	// being forwarded): do not forward this one.
	VersionStale
	// VersionBusy means another key of the entity is being forwarded right
	// now; try again after Version.BusyUntil (or sooner, once released).
	VersionBusy
)

// String returns the outcome's name for logs.
func (o VersionOutcome) String() string {
	switch o {
	case VersionFresh:
		return "fresh"
	case VersionStale:
		return "stale"
	case VersionBusy:
		return "busy"
	}
	return "unknown"
}

// Version is the result of [Store.AdvanceVersion].
type Version struct {
	Outcome VersionOutcome
	// Newest is the newest version recorded for the entity.
	Newest string
	// BusyUntil is when the other key's hold on the entity ends, for
	// VersionBusy.
	BusyUntil time.Time
}

// VersionRequest names one ordered call: the key about to call
// destination with version of entity.
type VersionRequest struct {
	Source, Destination string
	// Entity and Version are the event's ordering inputs.
	Entity, Version string
	// Key is the job key of the call.
	Key string
	// Call is the call number its claim returned; a fresh version logs
	// the call in delivery_attempts as started (0 logs nothing).
	Call int
	// Hold is how long the entity stays held for Key unless released.
	Hold time.Duration
}

// advanceVersionSQL records $4 as the entity's newest forwarded version
// and takes the entity for key $5 until $6 ms from now, unless a newer
// version is recorded or another key holds the entity; when it does, it
// logs the call ($7) about to be made as 'calling' (an unordered event's
// claim logs nothing: its claimed run says the call is under way); a
// sweep marks the row 'unknown' if the worker stops before the outcome. The row lock of the upsert makes two workers racing on one
// entity decide one after the other; the hold makes their calls go one
// after the other, so the destination never sees the older version after
// the newer one.
const advanceVersionSQL = `
WITH advanced AS (
    INSERT INTO entity_versions AS v (source, destination, entity, version, key, inflight_key, inflight_until)
    VALUES ($1, $2, $3, $4, $5, $5, now() + $6 * interval '1 millisecond')
    ON CONFLICT (source, destination, entity) DO UPDATE
        SET version = EXCLUDED.version, key = EXCLUDED.key, updated_at = now(),
            inflight_key = EXCLUDED.inflight_key, inflight_until = EXCLUDED.inflight_until
        WHERE webhookd_version_cmp(v.version, EXCLUDED.version) <= 0
          AND (v.inflight_key IS NULL OR v.inflight_key = EXCLUDED.key OR v.inflight_until <= now())
    RETURNING v.version
), started AS (
    INSERT INTO delivery_attempts (key, call, succeeded, duration_ms, state)
    SELECT $5, $7, false, 0, 'calling' FROM advanced WHERE $7 > 0
)
SELECT version FROM advanced`

// versionStateSQL explains a refused advance: stale (a newer version is
// recorded) or busy (another key holds the entity). It runs after the
// upsert, so it sees the row that refused it or a later one.
const versionStateSQL = `
SELECT v.version, webhookd_version_cmp(v.version, $4) > 0, COALESCE(v.inflight_until, now())
FROM entity_versions v
WHERE v.source = $1 AND v.destination = $2 AND v.entity = $3`

// AdvanceVersion decides whether r.Version of r.Entity may be forwarded
// to r.Destination as r.Key, in one atomic statement: VersionFresh
// (recorded as the newest, the entity held for the key for r.Hold, and
// the call logged as started), VersionStale (a newer version was already
// forwarded or is in flight) or VersionBusy (another key's call for the
// entity is in flight). Versions compare as numbers when both parse as
// numbers, as RFC 3339 times when both parse as times, else byte-wise.
func (s *Store) AdvanceVersion(ctx context.Context, r VersionRequest) (Version, error) {
	source, destination, entity, version := r.Source, r.Destination, r.Entity, r.Version
	rows, err := s.pool.Query(ctx, advanceVersionSQL, source, destination, entity, version, r.Key, r.Hold.Milliseconds(), r.Call)
	if err != nil {
		return Version{}, fmt.Errorf("error checking entity version: %w", err)
	}
	var newest string
	fresh := false
	for rows.Next() {
		if err := rows.Scan(&newest); err != nil {
			rows.Close()
			return Version{}, fmt.Errorf("error checking entity version: %w", err)
		}
		fresh = true
	}
	if err := rows.Err(); err != nil {
		return Version{}, fmt.Errorf("error checking entity version: %w", err)
	}
	if fresh {
		return Version{Outcome: VersionFresh, Newest: newest}, nil
	}
	var (
		stale bool
		until time.Time
	)
	if err := s.pool.QueryRow(ctx, versionStateSQL, source, destination, entity, version).Scan(&newest, &stale, &until); err != nil {
		return Version{}, fmt.Errorf("error checking entity version: %w", translate(err))
	}
	if stale {
		return Version{Outcome: VersionStale, Newest: newest}, nil
	}
	return Version{Outcome: VersionBusy, Newest: newest, BusyUntil: until}, nil
}

const releaseVersionSQL = `
UPDATE entity_versions SET inflight_key = NULL, inflight_until = NULL
WHERE source = $1 AND destination = $2 AND entity = $3 AND inflight_key = $4`

// ReleaseVersion ends r.Key's hold on r.Entity, taken by a VersionFresh
// [Store.AdvanceVersion], once its call's outcome is stored. Releasing a
// hold that passed or was never taken does nothing.
func (s *Store) ReleaseVersion(ctx context.Context, r VersionRequest) error {
	if _, err := s.pool.Exec(ctx, releaseVersionSQL, r.Source, r.Destination, r.Entity, r.Key); err != nil {
		return fmt.Errorf("error releasing entity: %w", err)
	}
	return nil
}
