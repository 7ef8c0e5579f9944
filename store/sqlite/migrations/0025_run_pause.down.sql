DROP INDEX runs_paused;
ALTER TABLE runs DROP COLUMN paused;
