SET lock_timeout = '10s';
ALTER TABLE events RESET (fillfactor);
