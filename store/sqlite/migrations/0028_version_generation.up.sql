-- The version generation (store.Versions): one row, advanced by every
-- write to version_rules or definition_versions, and by every document
-- version stored (which may be the latest a start takes), in the writing
-- transaction. VersionPolicy returns it with the policy; a create that
-- carries the generation it chose its version from is refused when the
-- generation has moved, so a client may keep a policy instead of reading
-- it before every start.
CREATE TABLE version_generation (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    n   INTEGER NOT NULL
) STRICT;
INSERT INTO version_generation (one, n) VALUES (1, 1);

CREATE TRIGGER version_rules_generation_insert AFTER INSERT ON version_rules
BEGIN UPDATE version_generation SET n = n + 1; END;
CREATE TRIGGER version_rules_generation_update AFTER UPDATE ON version_rules
BEGIN UPDATE version_generation SET n = n + 1; END;
CREATE TRIGGER version_rules_generation_delete AFTER DELETE ON version_rules
BEGIN UPDATE version_generation SET n = n + 1; END;
CREATE TRIGGER definition_versions_generation_insert AFTER INSERT ON definition_versions
BEGIN UPDATE version_generation SET n = n + 1; END;
CREATE TRIGGER definition_versions_generation_update AFTER UPDATE ON definition_versions
BEGIN UPDATE version_generation SET n = n + 1; END;
CREATE TRIGGER definition_versions_generation_delete AFTER DELETE ON definition_versions
BEGIN UPDATE version_generation SET n = n + 1; END;
CREATE TRIGGER documents_generation_insert AFTER INSERT ON documents
BEGIN UPDATE version_generation SET n = n + 1; END;
CREATE TRIGGER documents_generation_update AFTER UPDATE ON documents
BEGIN UPDATE version_generation SET n = n + 1; END;
CREATE TRIGGER documents_generation_delete AFTER DELETE ON documents
BEGIN UPDATE version_generation SET n = n + 1; END;
