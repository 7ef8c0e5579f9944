DROP INDEX runs_finished;
DROP INDEX runs_active;
