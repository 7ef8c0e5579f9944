-- Triggers map an event to the run's business key and concurrency key
-- (CEL expressions; empty: none).
ALTER TABLE triggers ADD COLUMN business_key TEXT NOT NULL DEFAULT '';
ALTER TABLE triggers ADD COLUMN concurrency_key TEXT NOT NULL DEFAULT '';
