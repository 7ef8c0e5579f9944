-- Triggers map an event to the run's business key and concurrency key
-- (CEL expressions; empty: none).
ALTER TABLE triggers ADD COLUMN business_key text NOT NULL DEFAULT '';
ALTER TABLE triggers ADD COLUMN concurrency_key text NOT NULL DEFAULT '';
