-- The catalog (store.Catalog): the flows, job kinds and workflows every
-- process registers, by kind, name, version (0 for workflows) and
-- row_build (the build id for workflows, '' for flows and job kinds,
-- whose version has one row; build_id is then the first publisher's).
-- spec, input_schema and output_schema are JSON; queues, handlers and
-- schedules JSON arrays of strings. Times are Unix microseconds UTC.
-- Never pruned.
CREATE TABLE definitions (
    kind          TEXT NOT NULL,
    name          TEXT NOT NULL,
    version       INTEGER NOT NULL,
    row_build     TEXT NOT NULL,
    build_id      TEXT NOT NULL,
    hash          TEXT NOT NULL,
    spec          TEXT NOT NULL,
    input_schema  TEXT NOT NULL,
    output_schema TEXT NOT NULL,
    queues        TEXT NOT NULL,
    handlers      TEXT NOT NULL,
    schedules     TEXT NOT NULL,
    published_at  INTEGER NOT NULL,
    published_by  TEXT NOT NULL,
    PRIMARY KEY (kind, name, version, row_build)
) STRICT, WITHOUT ROWID;
