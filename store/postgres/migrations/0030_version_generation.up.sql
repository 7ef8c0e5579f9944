-- The version generation (store.Versions): one row, advanced by every
-- statement that writes version_rules or definition_versions, and by
-- every document version stored (which may be the latest a start takes),
-- in that statement's transaction. VersionPolicy returns it with the policy; a
-- create that carries the generation it chose its version from is refused
-- when the generation has moved (the apply's guard), so a client may keep
-- a policy instead of reading it before every start.
CREATE TABLE version_generation (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    n   bigint NOT NULL
);
INSERT INTO version_generation (one, n) VALUES (true, 1);

CREATE FUNCTION version_generation_advance() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE version_generation SET n = n + 1;
    RETURN NULL;
END
$$;

CREATE TRIGGER version_rules_generation AFTER INSERT OR UPDATE OR DELETE ON version_rules
    FOR EACH STATEMENT EXECUTE FUNCTION version_generation_advance();
CREATE TRIGGER definition_versions_generation AFTER INSERT OR UPDATE OR DELETE ON definition_versions
    FOR EACH STATEMENT EXECUTE FUNCTION version_generation_advance();
-- Per row: an idempotent re-store of a document inserts nothing and
-- changes nothing.
CREATE TRIGGER documents_generation AFTER INSERT OR UPDATE OR DELETE ON documents
    FOR EACH ROW EXECUTE FUNCTION version_generation_advance();
