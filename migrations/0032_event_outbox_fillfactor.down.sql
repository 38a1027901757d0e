SET lock_timeout = '10s';
ALTER TABLE event_outbox RESET (fillfactor);
