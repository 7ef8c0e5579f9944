ALTER TABLE triggers DROP COLUMN concurrency_key;
ALTER TABLE triggers DROP COLUMN business_key;
