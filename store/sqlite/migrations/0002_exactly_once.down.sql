DROP TABLE workers;
ALTER TABLE runs DROP COLUMN condition;
DROP INDEX events_key;
ALTER TABLE events DROP COLUMN key;
ALTER TABLE tasks DROP COLUMN details;
ALTER TABLE tasks DROP COLUMN handler;
