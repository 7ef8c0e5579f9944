-- Version rules and version states (store.Versions), by definition name
-- (flows, job kinds and documents share the flow runtime's names). A
-- rule is the root package's VersionRule as JSON; a version without a
-- row in definition_versions is active. Times are Unix microseconds UTC.
-- Retention (PruneRuns) touches neither.
CREATE TABLE version_rules (
    name       TEXT PRIMARY KEY,
    rule       TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    updated_by TEXT NOT NULL DEFAULT ''
) STRICT, WITHOUT ROWID;

CREATE TABLE definition_versions (
    name       TEXT NOT NULL,
    version    INTEGER NOT NULL,
    state      TEXT NOT NULL,
    changed_at INTEGER NOT NULL,
    changed_by TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (name, version)
) STRICT, WITHOUT ROWID;

-- CountRunsByVersion groups the runs of a name by version.
CREATE INDEX runs_workflow_version ON runs (workflow, version);
