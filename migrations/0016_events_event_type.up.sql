SET lock_timeout = '10s';
SET statement_timeout = '5min';

-- The event's type as its sender names it (a source's event_type: spec,
-- or its scheme's default), or NULL when the sender gives none. Shown and
-- filtered wherever events are listed, matched by destination filters and
-- sent to destinations as Webhookd-Event-Type. A column without a default
-- is added without rewriting the table.
ALTER TABLE events ADD COLUMN event_type text;
