DROP TRIGGER documents_generation ON documents;
DROP TRIGGER definition_versions_generation ON definition_versions;
DROP TRIGGER version_rules_generation ON version_rules;
DROP FUNCTION version_generation_advance();
DROP TABLE version_generation;
