ALTER TABLE delivery_attempts DROP COLUMN IF EXISTS sent_body;
