ALTER TABLE tasks DROP COLUMN trace_context;
ALTER TABLE runs DROP COLUMN trace_context;
