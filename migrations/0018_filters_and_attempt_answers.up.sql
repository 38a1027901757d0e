SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- Destination filters (issue 12): a destination whose filter an event's
-- type matches none of makes no run for it, so the event's state counts
-- only the destinations that want it, and that may be none. destinations
-- is now that count as given: 0 means no destination wants the event,
-- which is done once handed off (callers pass at least 1 for a source
-- without filters, as every caller did before).
CREATE OR REPLACE FUNCTION webhookd_event_state(handed_off boolean, recorded_only boolean, statuses text[], destinations integer)
RETURNS text LANGUAGE sql IMMUTABLE STRICT AS $$
SELECT CASE
    WHEN recorded_only AND cardinality(statuses) = 0 THEN 'recorded_only'
    WHEN NOT handed_off AND cardinality(statuses) = 0 THEN 'received'
    WHEN 'dead' = ANY (statuses) THEN 'dead'
    WHEN 'failed' = ANY (statuses) THEN 'failed'
    WHEN 'running' = ANY (statuses) THEN 'running'
    WHEN NOT recorded_only AND cardinality(statuses) < greatest(destinations, 0) THEN 'queued'
    WHEN 'skipped_stale' = ANY (statuses) AND NOT 'done' = ANY (statuses) THEN 'skipped_stale'
    ELSE 'done'
END
$$;

-- Every attempt kept (issue 12): what the destination answered, failures
-- as successes, and when the next try is due. answer_headers holds the
-- answer's headers of note (jobs: Content-Type, Retry-After, request ids;
-- each value at most 256 bytes); answer_body its first 4 KiB as sent,
-- answer_truncated whether there was more. Retention deletes these rows
-- with their attempts. Columns without a default are added without
-- rewriting the table.
ALTER TABLE delivery_attempts
    ADD COLUMN answer_headers jsonb,
    ADD COLUMN answer_body bytea,
    ADD COLUMN answer_truncated boolean,
    ADD COLUMN retry_at timestamptz;
