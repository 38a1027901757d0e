SET lock_timeout = '10s';
SET statement_timeout = '5min';

ALTER TABLE delivery_attempts
    DROP COLUMN answer_headers,
    DROP COLUMN answer_body,
    DROP COLUMN answer_truncated,
    DROP COLUMN retry_at;

CREATE OR REPLACE FUNCTION webhookd_event_state(handed_off boolean, recorded_only boolean, statuses text[], destinations integer)
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
