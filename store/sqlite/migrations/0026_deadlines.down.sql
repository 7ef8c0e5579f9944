DROP INDEX runs_deadline;
ALTER TABLE runs DROP COLUMN deadline;
