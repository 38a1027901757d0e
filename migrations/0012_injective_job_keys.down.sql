SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- Back to keys written <source>:<destination>:<external_id>[#<generation>]
-- unescaped. Fails if two runs would share a key that way, the collision
-- the up migration removed.
CREATE TEMPORARY TABLE rekeyed ON COMMIT DROP AS
SELECT key AS old_key,
       source || ':' || destination || ':' || external_id ||
       CASE WHEN generation > 1 THEN '#' || generation ELSE '' END AS new_key
FROM job_runs WHERE strpos(external_id, '#') > 0;
CREATE UNIQUE INDEX ON rekeyed (old_key);
ANALYZE rekeyed;

UPDATE delivery_attempts a SET key = r.new_key FROM rekeyed r WHERE a.key = r.old_key;
UPDATE entity_versions v SET key = r.new_key FROM rekeyed r WHERE v.key = r.old_key;
UPDATE entity_versions v SET inflight_key = r.new_key FROM rekeyed r WHERE v.inflight_key = r.old_key;
UPDATE job_runs j SET key = '#' || j.key FROM rekeyed r WHERE j.key = r.old_key;
UPDATE job_runs j SET key = r.new_key FROM rekeyed r WHERE j.key = '#' || r.old_key;
