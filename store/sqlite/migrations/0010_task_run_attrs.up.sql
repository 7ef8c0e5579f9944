-- Telemetry (docs/observability.md): a run's tags and metadata, as the
-- runs table holds them, copied into every task of the run when the task
-- is inserted, so that a worker labels the events of the task without
-- reading the run. A run's tags and metadata never change, so the copy
-- never goes stale. The tasks waiting now get those of their runs.
ALTER TABLE tasks ADD COLUMN tags TEXT NOT NULL DEFAULT '[]';
ALTER TABLE tasks ADD COLUMN metadata TEXT;
UPDATE tasks SET tags = r.tags, metadata = r.metadata FROM runs r
WHERE r.id = tasks.run_id AND (r.tags <> '[]' OR r.metadata IS NOT NULL);
