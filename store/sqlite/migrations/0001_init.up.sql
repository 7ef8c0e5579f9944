-- Runs, their history and the task queue. Times are Unix microseconds UTC;
-- JSON values are TEXT, NULL when absent.

CREATE TABLE runs (
    id          TEXT PRIMARY KEY,
    workflow    TEXT NOT NULL,
    version     INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    status      TEXT NOT NULL,
    input       TEXT,
    output      TEXT,
    error       TEXT NOT NULL DEFAULT '',
    business_id TEXT, -- NULL when the run has none
    key_scope   TEXT NOT NULL DEFAULT '',
    -- The business id while it must stay unique: for scope active while
    -- the run is active, for scope forever always; NULL otherwise.
    unique_key  TEXT,
    parent_id   TEXT NOT NULL DEFAULT '',
    tags        TEXT NOT NULL DEFAULT '[]',
    metadata    TEXT,
    state       TEXT,
    published   TEXT,
    seq         INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    finished_at INTEGER
) STRICT;

-- Partial indexes leave out the (many) runs without a value.
CREATE UNIQUE INDEX runs_unique_key ON runs (unique_key) WHERE unique_key IS NOT NULL;
-- ListRuns walks these newest first; FindRun uses runs_business.
CREATE INDEX runs_created ON runs (created_at, id);
CREATE INDEX runs_workflow ON runs (workflow, created_at, id);
CREATE INDEX runs_business ON runs (business_id, created_at, id) WHERE business_id IS NOT NULL;
-- PruneRuns.
CREATE INDEX runs_finished ON runs (finished_at) WHERE finished_at IS NOT NULL;

CREATE TABLE events (
    run_id  TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq     INTEGER NOT NULL,
    kind    TEXT NOT NULL,
    step    TEXT NOT NULL DEFAULT '',
    idx     INTEGER NOT NULL DEFAULT 0,
    attempt INTEGER NOT NULL DEFAULT 0,
    name    TEXT NOT NULL DEFAULT '',
    data    TEXT,
    error   TEXT NOT NULL DEFAULT '',
    at      INTEGER NOT NULL,
    PRIMARY KEY (run_id, seq)
) STRICT, WITHOUT ROWID;

CREATE TABLE tasks (
    -- AUTOINCREMENT: an id is never reused, so a lease (id, token) never
    -- names a later task.
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id      TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    queue       TEXT NOT NULL,
    kind        TEXT NOT NULL,
    workflow    TEXT NOT NULL,
    version     INTEGER NOT NULL,
    step        TEXT NOT NULL DEFAULT '',
    idx         INTEGER NOT NULL DEFAULT -1,
    attempt     INTEGER NOT NULL DEFAULT 0,
    payload     TEXT,
    item        TEXT,
    priority    INTEGER NOT NULL DEFAULT 0,
    ready_at    INTEGER NOT NULL,
    owner       TEXT,
    -- Incremented by every claim: a task's tokens never repeat.
    token       INTEGER NOT NULL DEFAULT 0,
    lease_until INTEGER,
    claims      INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL
) STRICT;

-- ClaimTasks walks a queue in claim order and stops after its limit;
-- NextReady scans a queue's entries. No indexed column changes when a task
-- is claimed or heartbeats, so those writes touch the table alone: every
-- index costs a page write per commit.
CREATE INDEX tasks_claim ON tasks (queue, priority DESC, ready_at, id);
-- Cancel, and the cascade from runs.
CREATE INDEX tasks_run ON tasks (run_id, kind, step);
