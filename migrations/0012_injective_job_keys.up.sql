SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- Job keys are <source>:<destination>:<external_id>[#<generation>]. An
-- event id holding "#<n>" made its key equal to generation n of another
-- event's forced replay. From now on (jobs.Key) a '#' in the id is written
-- '##' (and in the source and destination names, which the configuration
-- limits to [a-z0-9_-], '#' is written '##' and ':' '#:'), so distinct
-- runs have distinct keys. This re-keys the runs of event ids that hold a
-- '#', with the calls and ordering rows that name them; every other key
-- stays as it is. Such a run's later calls carry its new key as their
-- Idempotency-Key.
CREATE TEMPORARY TABLE rekeyed ON COMMIT DROP AS
SELECT key AS old_key,
       replace(replace(source, '#', '##'), ':', '#:') || ':' ||
       replace(replace(destination, '#', '##'), ':', '#:') || ':' ||
       replace(external_id, '#', '##') ||
       CASE WHEN generation > 1 THEN '#' || generation ELSE '' END AS new_key
FROM job_runs WHERE strpos(external_id, '#') > 0;
CREATE UNIQUE INDEX ON rekeyed (old_key);
ANALYZE rekeyed;

UPDATE delivery_attempts a SET key = r.new_key FROM rekeyed r WHERE a.key = r.old_key;
UPDATE entity_versions v SET key = r.new_key FROM rekeyed r WHERE v.key = r.old_key;
UPDATE entity_versions v SET inflight_key = r.new_key FROM rekeyed r WHERE v.inflight_key = r.old_key;
-- In two steps: a run's new key may be another re-keyed run's old one,
-- and the primary key is checked row by row. No key starts with '#'.
UPDATE job_runs j SET key = '#' || j.key FROM rekeyed r WHERE j.key = r.old_key;
UPDATE job_runs j SET key = r.new_key FROM rekeyed r WHERE j.key = '#' || r.old_key;
