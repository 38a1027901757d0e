SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- Fold the repeats back into the events' own counts before dropping them.
UPDATE events e
SET deliveries = e.deliveries + r.repeats,
    last_received_at = GREATEST(e.last_received_at, r.last_received_at)
FROM event_repeats r
WHERE r.source = e.source AND r.external_id = e.external_id;

DROP VIEW event_deliveries;
DROP TABLE event_repeats;
