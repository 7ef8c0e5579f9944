-- Version rules and version states (store.Versions), by definition name
-- (flows, job kinds and documents share the flow runtime's names). A
-- rule is the root package's VersionRule as JSON; a version without a
-- row in definition_versions is active. Retention (PruneRuns) touches
-- neither.
CREATE TABLE version_rules (
    name       text COLLATE "C" PRIMARY KEY,
    rule       jsonb NOT NULL,
    updated_at timestamptz NOT NULL,
    updated_by text NOT NULL DEFAULT ''
);

CREATE TABLE definition_versions (
    name       text COLLATE "C" NOT NULL,
    version    integer NOT NULL,
    state      text NOT NULL,
    changed_at timestamptz NOT NULL,
    changed_by text NOT NULL DEFAULT '',
    PRIMARY KEY (name, version)
);

-- CountRunsByVersion groups the runs of a name by version.
CREATE INDEX runs_workflow_version ON runs (workflow, version);
