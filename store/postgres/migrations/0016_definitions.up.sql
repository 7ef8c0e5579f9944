-- The catalog (store.Catalog): the flows, job kinds and workflows every
-- process registers, by kind, name, version (0 for workflows) and
-- row_build (the build id for workflows, '' for flows and job kinds,
-- whose version has one row; build_id is then the first publisher's).
-- Never pruned.
CREATE TABLE definitions (
    kind          text COLLATE "C" NOT NULL,
    name          text COLLATE "C" NOT NULL,
    version       bigint NOT NULL,
    row_build     text COLLATE "C" NOT NULL,
    build_id      text NOT NULL,
    hash          text NOT NULL,
    spec          bytea NOT NULL,
    input_schema  bytea NOT NULL,
    output_schema bytea NOT NULL,
    queues        text[] NOT NULL,
    handlers      text[] NOT NULL,
    schedules     text[] NOT NULL,
    published_at  timestamptz NOT NULL,
    published_by  text NOT NULL,
    PRIMARY KEY (kind, name, version, row_build)
);
