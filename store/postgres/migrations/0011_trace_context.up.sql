-- Traces (docs/observability.md): the W3C traceparent of a run's root
-- span ('' when the run is not traced), set when the run is created and
-- never changed, and copied into every task of the run when the task is
-- inserted, so that a worker parents its spans without reading the run.
-- No index holds them: set at insert and never changed, they keep the
-- updates of runs and the claims of tasks HOT. A column with a constant
-- default is added without rewriting the table.
ALTER TABLE runs ADD COLUMN trace_context text NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN trace_context text NOT NULL DEFAULT '';
