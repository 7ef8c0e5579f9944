-- Traces (docs/observability.md): the W3C traceparent of a run's root
-- span ('' when the run is not traced), set when the run is created and
-- never changed, and copied into every task of the run when the task is
-- inserted, so that a worker parents its spans without reading the run.
ALTER TABLE runs ADD COLUMN trace_context TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN trace_context TEXT NOT NULL DEFAULT '';
