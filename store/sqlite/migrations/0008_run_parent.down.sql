DROP INDEX runs_parent;
