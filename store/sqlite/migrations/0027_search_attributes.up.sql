-- Search attributes (docs/operations.md, Search attributes). A run's
-- attributes live in runs.search_attributes, a JSON object of name to
-- {"t": type, "v": value} (a time as Unix microseconds UTC), written with
-- the rest of the run by the change that sets them. The triggers copy
-- them to run_attributes in the same statement, one row per attribute (a
-- keyword_list one per element; an empty list one row without a value):
-- the indexed rows the list filters read. A value goes in s (string,
-- keyword, keyword_list), n (int, time as Unix microseconds, bool as 1 or
-- 0) or f (float). Deleted with the run.
ALTER TABLE runs ADD COLUMN search_attributes TEXT;

CREATE TABLE run_attributes (
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    name   TEXT NOT NULL,
    type   TEXT NOT NULL,
    s      TEXT,
    n      INTEGER,
    f      REAL
) STRICT;
CREATE INDEX run_attributes_run ON run_attributes (run_id, name);
CREATE INDEX run_attributes_s ON run_attributes (name, s) WHERE s IS NOT NULL;
CREATE INDEX run_attributes_n ON run_attributes (name, n) WHERE n IS NOT NULL;
CREATE INDEX run_attributes_f ON run_attributes (name, f) WHERE f IS NOT NULL;

CREATE TRIGGER runs_attributes_insert AFTER INSERT ON runs WHEN NEW.search_attributes IS NOT NULL
BEGIN
    INSERT INTO run_attributes (run_id, name, type, s, n, f)
    SELECT NEW.id, a.key, a.value ->> '$.t',
        CASE WHEN a.value ->> '$.t' IN ('string', 'keyword') THEN a.value ->> '$.v' ELSE e.value END,
        CASE WHEN a.value ->> '$.t' IN ('int', 'time', 'bool') THEN a.value ->> '$.v' END,
        CASE WHEN a.value ->> '$.t' = 'float' THEN a.value ->> '$.v' END
    FROM json_each(NEW.search_attributes) a
    LEFT JOIN json_each(CASE WHEN a.value ->> '$.t' = 'keyword_list' THEN a.value -> '$.v' ELSE '[]' END) e;
END;

CREATE TRIGGER runs_attributes_update AFTER UPDATE OF search_attributes ON runs
WHEN OLD.search_attributes IS NOT NEW.search_attributes
BEGIN
    DELETE FROM run_attributes WHERE run_id = NEW.id;
    INSERT INTO run_attributes (run_id, name, type, s, n, f)
    SELECT NEW.id, a.key, a.value ->> '$.t',
        CASE WHEN a.value ->> '$.t' IN ('string', 'keyword') THEN a.value ->> '$.v' ELSE e.value END,
        CASE WHEN a.value ->> '$.t' IN ('int', 'time', 'bool') THEN a.value ->> '$.v' END,
        CASE WHEN a.value ->> '$.t' = 'float' THEN a.value ->> '$.v' END
    FROM json_each(NEW.search_attributes) a
    LEFT JOIN json_each(CASE WHEN a.value ->> '$.t' = 'keyword_list' THEN a.value -> '$.v' ELSE '[]' END) e;
END;
