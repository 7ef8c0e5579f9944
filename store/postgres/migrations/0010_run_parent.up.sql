-- ListRuns by parent (a workflow's children) walks this index newest
-- first. A run's parent never changes, so updates of runs stay HOT.
CREATE INDEX runs_parent ON runs (parent_id, created_at, id) WHERE parent_id <> '';
