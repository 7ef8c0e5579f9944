-- Telemetry (docs/observability.md): a run's tags and metadata, of the
-- types the runs table gives them, copied into every task of the run when
-- the task is inserted, so that a worker labels the events of the task
-- without reading the run. A run's tags and metadata never change, so the
-- copy never goes stale. No index holds them, so claims stay HOT; a
-- column with a constant default is added without rewriting the table.
-- The tasks waiting now get those of their runs.
ALTER TABLE tasks ADD COLUMN tags text[] NOT NULL DEFAULT '{}';
ALTER TABLE tasks ADD COLUMN metadata jsonb;
UPDATE tasks t SET tags = r.tags, metadata = r.metadata FROM runs r
WHERE r.id = t.run_id AND (r.tags <> '{}' OR r.metadata IS NOT NULL);
