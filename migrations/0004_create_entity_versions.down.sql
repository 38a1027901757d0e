SET lock_timeout = '10s';
DROP FUNCTION IF EXISTS webhookd_version_cmp(text, text);
DROP TABLE IF EXISTS entity_versions;
