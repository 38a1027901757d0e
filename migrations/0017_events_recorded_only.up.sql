SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- An event imported with `webhookd import --record-only` was delivered by
-- another system: it is stored, so a later delivery of the same id is a
-- duplicate, but it gets no outbox row and no runs, so neither the relay
-- nor the reconciler ever forwards it; only an operator's replay does. A
-- constant default adds the column without rewriting the table.
ALTER TABLE events ADD COLUMN recorded_only boolean NOT NULL DEFAULT false;

-- The one rule for an event's state (migration 0008), now knowing the
-- mark: a recorded-only event without runs is 'recorded_only'; once
-- replayed, its state comes from the runs it has, and a destination
-- without one is not waiting for anything (nothing will queue it), so it
-- does not make the event 'queued'.
CREATE FUNCTION webhookd_event_state(handed_off boolean, recorded_only boolean, statuses text[], destinations integer)
RETURNS text LANGUAGE sql IMMUTABLE STRICT AS $$
SELECT CASE
    WHEN recorded_only AND cardinality(statuses) = 0 THEN 'recorded_only'
    WHEN NOT handed_off AND cardinality(statuses) = 0 THEN 'received'
    WHEN 'dead' = ANY (statuses) THEN 'dead'
    WHEN 'failed' = ANY (statuses) THEN 'failed'
    WHEN 'running' = ANY (statuses) THEN 'running'
    WHEN NOT recorded_only AND cardinality(statuses) < greatest(destinations, 1) THEN 'queued'
    WHEN 'skipped_stale' = ANY (statuses) AND NOT 'done' = ANY (statuses) THEN 'skipped_stale'
    ELSE 'done'
END
$$;

-- The three-argument form stays for processes of the previous version
-- while a deploy replaces them; it knows no recorded-only events.
CREATE OR REPLACE FUNCTION webhookd_event_state(handed_off boolean, statuses text[], destinations integer)
RETURNS text LANGUAGE sql IMMUTABLE STRICT AS $$
SELECT webhookd_event_state(handed_off, false, statuses, destinations)
$$;
