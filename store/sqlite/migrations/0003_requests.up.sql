-- Requests to runs (store.Request): updates and queries sent by processes
-- that may not have the run's code, answered by one that has. Times are
-- Unix microseconds UTC; JSON values are TEXT, NULL when absent. A run's
-- requests go with it.
CREATE TABLE requests (
    run_id      TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    id          TEXT NOT NULL,
    kind        TEXT NOT NULL,
    name        TEXT NOT NULL,
    args        TEXT,
    seq         INTEGER NOT NULL,
    status      TEXT NOT NULL,
    result      TEXT,
    code        TEXT NOT NULL DEFAULT '',
    error       TEXT NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    answered_at INTEGER,
    PRIMARY KEY (run_id, id)
) STRICT, WITHOUT ROWID;
