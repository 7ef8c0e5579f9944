DROP TRIGGER runs_attributes_update ON runs;
DROP TRIGGER runs_attributes_insert ON runs;
DROP FUNCTION runs_attributes_sync();
DROP TABLE run_attributes;
ALTER TABLE runs DROP COLUMN search_attributes;
