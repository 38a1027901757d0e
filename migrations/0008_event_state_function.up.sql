SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- webhookd_event_state is the one rule for an event's state, used by the
-- answer to a repeat delivery and by the admin listing alike. statuses are
-- the latest run (highest generation) of each destination; destinations
-- is how many the source has (0 counts as 1).
CREATE FUNCTION webhookd_event_state(handed_off boolean, statuses text[], destinations integer)
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
