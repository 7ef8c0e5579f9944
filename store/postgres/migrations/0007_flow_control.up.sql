-- Flow control (docs/flow-control.md): concurrency keys on runs and on
-- their work tasks, queue configurations, and the state that claims of
-- controlled queues keep.

-- The run's concurrency key ('' for none).
ALTER TABLE runs ADD COLUMN concurrency_key text COLLATE "C" NOT NULL DEFAULT '';

-- A task's flow key: its run's concurrency key for work (steps and
-- activities, which flow control governs), NULL for tasks it never holds
-- back (decisions, timers, operations). Set when the task is inserted and
-- never changed, so claims stay HOT updates. tasks_flow lets a controlled
-- claim walk the distinct keys of a queue (a skip scan), take each key's
-- tasks in claim order, and find the NULL group's at once, whatever the
-- backlog of held-back work.
ALTER TABLE tasks ADD COLUMN flow_key text COLLATE "C";
CREATE INDEX tasks_flow ON tasks (queue, flow_key, priority DESC, ready_at, id);

-- A queue's configuration (store.Queue) and the state of its claims:
-- the current rate window (start and starts counted), the virtual clock of
-- the rotation between keys, and the key after which the next claim
-- starts its walk of keys. A claim of a controlled queue locks its row,
-- which serializes the queue's claims across processes.
CREATE TABLE queues (
    name                text COLLATE "C" PRIMARY KEY,
    paused              boolean NOT NULL DEFAULT false,
    max_running         bigint NOT NULL DEFAULT 0,
    max_running_per_key bigint NOT NULL DEFAULT 0,
    rate_limit          bigint NOT NULL DEFAULT 0,
    rate_period         bigint NOT NULL DEFAULT 0, -- microseconds
    key_rate_limit      bigint NOT NULL DEFAULT 0,
    key_rate_period     bigint NOT NULL DEFAULT 0, -- microseconds
    fair                boolean NOT NULL DEFAULT false,
    weights             jsonb,
    controlled          boolean GENERATED ALWAYS AS (paused OR max_running > 0 OR max_running_per_key > 0
                            OR rate_limit > 0 OR key_rate_limit > 0 OR fair OR weights IS NOT NULL) STORED,
    window_start        timestamptz,
    window_starts       bigint NOT NULL DEFAULT 0,
    vclock              double precision NOT NULL DEFAULT 0,
    key_cursor          text COLLATE "C",
    updated_at          timestamptz NOT NULL
);

-- The rotation and rate state of a key of a queue.
CREATE TABLE queue_keys (
    queue         text COLLATE "C" NOT NULL,
    key           text COLLATE "C" NOT NULL,
    vtime         double precision NOT NULL DEFAULT 0,
    window_start  timestamptz,
    window_starts bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, key)
);

-- The leases that controlled claims handed out: a row counts as running
-- while its task holds a live lease with its token (a task completed,
-- released, expired or claimed again does not count), and the next claim
-- of the queue deletes the rows that no longer count.
CREATE TABLE queue_leases (
    task_id bigint PRIMARY KEY,
    token   bigint NOT NULL,
    queue   text COLLATE "C" NOT NULL,
    key     text COLLATE "C" NOT NULL
);
CREATE INDEX queue_leases_queue ON queue_leases (queue);
