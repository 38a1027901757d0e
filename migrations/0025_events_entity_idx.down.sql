DROP INDEX IF EXISTS events_entity_idx;
