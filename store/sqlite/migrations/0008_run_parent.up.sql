-- ListRuns by parent (a workflow's children) walks this index newest
-- first.
CREATE INDEX runs_parent ON runs (parent_id, created_at, id) WHERE parent_id <> '';
