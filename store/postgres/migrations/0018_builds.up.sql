-- Build ids of code-first workflows (docs/deploying-builds.md): the build
-- that started a run (for a run that auto-upgrades, the build that last
-- decided it; '' for runs started before builds were recorded), the build
-- of a worker process, and the builds retired per workflow. A column with
-- a constant default is added without rewriting the table.
ALTER TABLE runs ADD COLUMN build_id text NOT NULL DEFAULT '';
ALTER TABLE workers ADD COLUMN build_id text NOT NULL DEFAULT '';
-- No index holds build_id: counting a workflow's open runs per build (an
-- operator's call) reads the workflow's runs through runs_workflow, and
-- the updates of runs stay as cheap as before.
CREATE TABLE retired_builds (
    workflow   text COLLATE "C" NOT NULL,
    build_id   text COLLATE "C" NOT NULL,
    retired_at timestamptz NOT NULL,
    PRIMARY KEY (workflow, build_id)
);
