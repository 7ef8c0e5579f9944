-- What step code logs (store.StepLogs): records per run in seq order,
-- per attempt (step, idx, attempt). size counts what the bounds count
-- (message and attrs; 0 for a marker); dropped > 0 makes a row the
-- marker of that many dropped records of its attempt; level is slog's
-- number. PruneRuns deletes a run's rows with it.
CREATE TABLE step_logs (
    run_id  text COLLATE "C" NOT NULL,
    seq     bigint NOT NULL,
    step    text NOT NULL,
    idx     integer NOT NULL,
    attempt integer NOT NULL,
    worker  text NOT NULL,
    at      timestamptz NOT NULL,
    level   integer NOT NULL,
    message text NOT NULL,
    attrs   text,
    size    integer NOT NULL,
    dropped integer NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, seq)
);
CREATE INDEX step_logs_attempt ON step_logs (run_id, step, idx, attempt, seq);
