SET lock_timeout = '10s';
DROP FUNCTION IF EXISTS webhookd_event_state(boolean, text[], integer);
