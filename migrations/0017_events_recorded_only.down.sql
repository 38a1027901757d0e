SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- Back to migration 0008's rule, which knows no recorded-only events.
CREATE OR REPLACE FUNCTION webhookd_event_state(handed_off boolean, statuses text[], destinations integer)
RETURNS text LANGUAGE sql IMMUTABLE STRICT AS $$
SELECT CASE
    WHEN NOT handed_off AND cardinality(statuses) = 0 THEN 'received'
    WHEN 'dead' = ANY (statuses) THEN 'dead'
    WHEN 'failed' = ANY (statuses) THEN 'failed'
    WHEN 'running' = ANY (statuses) THEN 'running'
    WHEN cardinality(statuses) < greatest(destinations, 1) THEN 'queued'
    WHEN 'skipped_stale' = ANY (statuses) AND NOT 'done' = ANY (statuses) THEN 'skipped_stale'
    ELSE 'done'
END
$$;
DROP FUNCTION webhookd_event_state(boolean, boolean, text[], integer);
ALTER TABLE events DROP COLUMN recorded_only;
