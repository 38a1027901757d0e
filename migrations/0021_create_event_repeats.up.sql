SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- A repeat delivery used to add to events.deliveries: a read and rewrite
-- of the event's wide row (headers, payload) on a random page, and after
-- each checkpoint a full-page image of that page in the WAL. Repeats are
-- now counted here, in a narrow row beside the event, written only when
-- the event is delivered again; events.deliveries keeps the count at
-- insert (the copies that arrived with the first delivery) and is no
-- longer updated. No foreign key to events: its check would lock, and so
-- write, the wide row again. Retention deletes a row with its event.
CREATE TABLE event_repeats (
    source           text        NOT NULL,
    external_id      text        NOT NULL,
    repeats          bigint      NOT NULL,
    last_received_at timestamptz NOT NULL,
    PRIMARY KEY (source, external_id)
) WITH (fillfactor = 70);
-- fillfactor: room on each page for the next version of a row, so that
-- counting a further repeat is a HOT update (no index entry).

-- The one definition of an event's delivery count and last delivery:
-- events(..., deliveries, last_received_at, ...) as the SPEC reads them,
-- repeats included. Every reader goes through it.
CREATE VIEW event_deliveries AS
SELECT e.source, e.external_id,
       e.deliveries + COALESCE(r.repeats, 0) AS deliveries,
       COALESCE(r.last_received_at, e.last_received_at) AS last_received_at
FROM events e
LEFT JOIN event_repeats r ON r.source = e.source AND r.external_id = e.external_id;
