-- Nothing to undo: the deleted waits were closed waits of deleted runs.
SELECT 1;
