-- Requests to runs (store.Request): updates and queries sent by processes
-- that may not have the run's code, answered by one that has. Unlike the
-- history and the tasks, requests name their run with a foreign key: they
-- are few, and they go with the run when PruneRuns deletes it; recording
-- one takes a share lock of the run, which keeps PruneRuns (FOR UPDATE
-- SKIP LOCKED) away from a run that is getting a request and its task.
CREATE TABLE requests (
    run_id      text COLLATE "C" NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    id          text COLLATE "C" NOT NULL,
    kind        text NOT NULL,
    name        text NOT NULL,
    args        jsonb,
    seq         bigint NOT NULL,
    status      text NOT NULL,
    result      jsonb,
    code        text NOT NULL DEFAULT '',
    error       text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL,
    answered_at timestamptz,
    PRIMARY KEY (run_id, id)
);
