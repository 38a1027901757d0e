SET lock_timeout = '10s';
SET statement_timeout = '5min';

DROP TABLE handshake_secrets;
