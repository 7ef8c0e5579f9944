DROP TRIGGER runs_attributes_update;
DROP TRIGGER runs_attributes_insert;
DROP TABLE run_attributes;
ALTER TABLE runs DROP COLUMN search_attributes;
