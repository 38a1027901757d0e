SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- The ordering guard serialises calls per entity: the key whose call is in
-- flight, and until when its claim on the entity holds (a worker that died
-- mid-call frees the entity when this passes). Without it two events of
-- one entity that both passed the version check could reach the
-- destination in the wrong order.
ALTER TABLE entity_versions
    ADD COLUMN inflight_key   text,
    ADD COLUMN inflight_until timestamptz;
