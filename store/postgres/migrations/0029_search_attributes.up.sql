-- Search attributes (docs/operations.md, Search attributes). A run's
-- attributes live in runs.search_attributes, a JSON object of name to
-- {"t": type, "v": value} (a time as Unix microseconds UTC), written with
-- the rest of the run by the change that sets them. The triggers copy
-- them to run_attributes in the same statement, one row per attribute (a
-- keyword_list one per element; an empty list one row without a value):
-- the indexed rows the list filters read. A value goes in s (string,
-- keyword, keyword_list), n (int, time as Unix microseconds, bool as 1 or
-- 0) or f (float). Deleted with the run (its foreign key). A nullable
-- column without a default is added without rewriting the table.
ALTER TABLE runs ADD COLUMN search_attributes jsonb;

CREATE TABLE run_attributes (
    run_id text COLLATE "C" NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    name   text COLLATE "C" NOT NULL,
    type   text NOT NULL,
    s      text COLLATE "C",
    n      bigint,
    f      double precision
);
CREATE INDEX run_attributes_run ON run_attributes (run_id, name);
CREATE INDEX run_attributes_s ON run_attributes (name, s) WHERE s IS NOT NULL;
CREATE INDEX run_attributes_n ON run_attributes (name, n) WHERE n IS NOT NULL;
CREATE INDEX run_attributes_f ON run_attributes (name, f) WHERE f IS NOT NULL;

CREATE FUNCTION runs_attributes_sync() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        DELETE FROM run_attributes WHERE run_id = NEW.id;
    END IF;
    INSERT INTO run_attributes (run_id, name, type, s, n, f)
    SELECT NEW.id, a.key, a.value ->> 't',
        CASE WHEN a.value ->> 't' IN ('string', 'keyword') THEN a.value ->> 'v' ELSE e.v END,
        CASE a.value ->> 't' WHEN 'int' THEN (a.value ->> 'v')::bigint WHEN 'time' THEN (a.value ->> 'v')::bigint
            WHEN 'bool' THEN CASE WHEN (a.value ->> 'v')::boolean THEN 1 ELSE 0 END END,
        CASE WHEN a.value ->> 't' = 'float' THEN (a.value ->> 'v')::double precision END
    FROM jsonb_each(NEW.search_attributes) AS a
    LEFT JOIN LATERAL jsonb_array_elements_text(CASE WHEN a.value ->> 't' = 'keyword_list' THEN a.value -> 'v'
        ELSE '[]'::jsonb END) AS e(v) ON true
    WHERE NEW.search_attributes IS NOT NULL;
    RETURN NULL;
END $$;

CREATE TRIGGER runs_attributes_insert AFTER INSERT ON runs
FOR EACH ROW WHEN (NEW.search_attributes IS NOT NULL) EXECUTE FUNCTION runs_attributes_sync();
CREATE TRIGGER runs_attributes_update AFTER UPDATE OF search_attributes ON runs
FOR EACH ROW WHEN (OLD.search_attributes IS DISTINCT FROM NEW.search_attributes) EXECUTE FUNCTION runs_attributes_sync();
