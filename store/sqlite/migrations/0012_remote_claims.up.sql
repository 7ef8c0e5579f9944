-- Remote work (docs/api.md#workers): the facts of each claim handed to a
-- worker outside the process, one row per task, replaced at every
-- hand-out. The worker's token carries only the task's id and a secret;
-- the server keeps the claim's fence token, the secret's SHA-256, the
-- identity that claimed and the attempt's times. No foreign key: rows of
-- tasks that are gone are deleted when a row is written (and when an
-- outcome commits), so that deleting a task costs nothing more.
CREATE TABLE remote_claims (
    task_id     INTEGER PRIMARY KEY,
    token       INTEGER NOT NULL,
    run_id      TEXT NOT NULL,
    secret_hash BLOB NOT NULL,
    principal   TEXT NOT NULL,
    worker_id   TEXT NOT NULL,
    claimed_at  INTEGER NOT NULL,
    deadline    INTEGER NOT NULL,
    lease_us    INTEGER NOT NULL
) STRICT;
