-- Execution timeouts (docs/operations.md, Time limits): the time a run
-- times out if it has not finished, in Unix microseconds UTC; NULL for a
-- run without one. The index holds only the active runs that have one,
-- so the maintenance scan for expired runs reads nothing else.
ALTER TABLE runs ADD COLUMN deadline INTEGER;
CREATE INDEX runs_deadline ON runs (deadline, id)
    WHERE deadline IS NOT NULL AND status IN ('pending', 'running', 'waiting');
