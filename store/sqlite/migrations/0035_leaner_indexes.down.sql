CREATE INDEX runs_workflow_version ON runs (workflow, version);
