DROP INDEX runs_workflow_version;
DROP TABLE definition_versions;
DROP TABLE version_rules;
