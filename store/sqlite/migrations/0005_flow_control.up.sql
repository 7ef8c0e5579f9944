-- Flow control (docs/flow-control.md): concurrency keys on runs and on
-- their work tasks, queue configurations, and the state that claims of
-- controlled queues keep. Times are Unix microseconds UTC.

-- The run's concurrency key ('' for none).
ALTER TABLE runs ADD COLUMN concurrency_key TEXT NOT NULL DEFAULT '';

-- A task's flow key: its run's concurrency key for work (steps and
-- activities, which flow control governs), NULL for tasks it never holds
-- back (decisions, timers, operations). tasks_flow lets a controlled claim
-- walk the distinct keys of a queue, take each key's tasks in claim order,
-- and find the NULL group's at once, whatever the backlog of held-back
-- work.
ALTER TABLE tasks ADD COLUMN flow_key TEXT;
CREATE INDEX tasks_flow ON tasks (queue, flow_key, priority DESC, ready_at, id);

-- A queue's configuration (store.Queue) and the state of its claims: the
-- current rate window, the virtual clock of the rotation between keys, and
-- the key after which the next claim starts its walk of keys.
CREATE TABLE queues (
    name                TEXT PRIMARY KEY,
    paused              INTEGER NOT NULL DEFAULT 0,
    max_running         INTEGER NOT NULL DEFAULT 0,
    max_running_per_key INTEGER NOT NULL DEFAULT 0,
    rate_limit          INTEGER NOT NULL DEFAULT 0,
    rate_period         INTEGER NOT NULL DEFAULT 0, -- microseconds
    key_rate_limit      INTEGER NOT NULL DEFAULT 0,
    key_rate_period     INTEGER NOT NULL DEFAULT 0, -- microseconds
    fair                INTEGER NOT NULL DEFAULT 0,
    weights             TEXT,
    controlled          INTEGER GENERATED ALWAYS AS (paused OR max_running > 0 OR max_running_per_key > 0
                            OR rate_limit > 0 OR key_rate_limit > 0 OR fair OR weights IS NOT NULL) STORED,
    window_start        INTEGER,
    window_starts       INTEGER NOT NULL DEFAULT 0,
    vclock              REAL NOT NULL DEFAULT 0,
    key_cursor          TEXT,
    updated_at          INTEGER NOT NULL
) STRICT;

-- The rotation and rate state of a key of a queue.
CREATE TABLE queue_keys (
    queue         TEXT NOT NULL,
    key           TEXT NOT NULL,
    vtime         REAL NOT NULL DEFAULT 0,
    window_start  INTEGER,
    window_starts INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, key)
) STRICT, WITHOUT ROWID;

-- The leases that controlled claims handed out: a row counts as running
-- while its task holds a live lease with its token; the next claim of the
-- queue deletes the rows that no longer count.
CREATE TABLE queue_leases (
    task_id INTEGER PRIMARY KEY,
    token   INTEGER NOT NULL,
    queue   TEXT NOT NULL,
    key     TEXT NOT NULL
) STRICT;
CREATE INDEX queue_leases_queue ON queue_leases (queue);
