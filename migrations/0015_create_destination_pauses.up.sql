SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- Destinations an operator paused: no call goes out while the row is
-- here; events keep being accepted and their calls wait. Every process
-- reads this table every couple of seconds, so a pause reaches them all
-- within seconds and survives restarts.
CREATE TABLE destination_pauses (
    source      text        NOT NULL,
    destination text        NOT NULL,
    paused_at   timestamptz NOT NULL DEFAULT now(),
    paused_by   text        NOT NULL,
    reason      text        NOT NULL DEFAULT '',
    PRIMARY KEY (source, destination)
);
