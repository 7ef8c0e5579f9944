-- What step code logs (store.StepLogs): records per run in seq order,
-- per attempt (step, idx, attempt). size counts what the bounds count
-- (message and attrs; 0 for a marker); dropped > 0 makes a row the
-- marker of that many dropped records of its attempt. Times are Unix
-- microseconds UTC; level is slog's number. Deleted with the run.
CREATE TABLE step_logs (
    run_id  TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq     INTEGER NOT NULL,
    step    TEXT NOT NULL,
    idx     INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    worker  TEXT NOT NULL,
    at      INTEGER NOT NULL,
    level   INTEGER NOT NULL,
    message TEXT NOT NULL,
    attrs   TEXT,
    size    INTEGER NOT NULL,
    dropped INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, seq)
) STRICT, WITHOUT ROWID;
CREATE INDEX step_logs_attempt ON step_logs (run_id, step, idx, attempt, seq);
