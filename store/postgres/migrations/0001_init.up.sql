-- Runs, their history and the task queue. The runner executes this with
-- search_path set to the store's schema, so every object lands there.
-- Times are timestamptz (microsecond precision, as the runtime's clock);
-- JSON values are jsonb, NULL when absent. Keys, ids and queue names use
-- the "C" collation: byte order, as in SQLite, and cheap comparisons.

CREATE TABLE runs (
    id          text COLLATE "C" PRIMARY KEY,
    workflow    text COLLATE "C" NOT NULL,
    version     bigint NOT NULL,
    kind        text NOT NULL,
    status      text NOT NULL,
    input       jsonb,
    output      jsonb,
    error       text NOT NULL DEFAULT '',
    business_id text COLLATE "C", -- NULL when the run has none
    key_scope   text NOT NULL DEFAULT '',
    -- workflow || chr(31) || business_id while it must stay unique: for
    -- scope active while the run is active, for scope forever always; NULL
    -- otherwise.
    unique_key  text COLLATE "C",
    parent_id   text NOT NULL DEFAULT '',
    tags        text[] NOT NULL DEFAULT '{}',
    metadata    jsonb,
    state       jsonb,
    published   jsonb,
    seq         bigint NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    finished_at timestamptz
) WITH (fillfactor = 50);
-- Each change of a run rewrites its row. When no indexed column changes
-- (finished_at is not indexed for that reason: PruneRuns walks
-- runs_created), the update is HOT: the new version goes in the same page
-- and no index is touched, provided the page has room for it. The runs of
-- a page were mostly created together, and change together, in one
-- transaction: hence room for a new version of every row.

-- Partial indexes leave out the (many) runs without a value.
CREATE UNIQUE INDEX runs_unique_key ON runs (unique_key) WHERE unique_key IS NOT NULL;
-- ListRuns walks these newest first; FindRun uses runs_business; PruneRuns
-- walks runs_created oldest first (a run finishes after it starts).
CREATE INDEX runs_created ON runs (created_at, id);
CREATE INDEX runs_workflow ON runs (workflow, created_at, id);
CREATE INDEX runs_business ON runs (business_id, created_at, id) WHERE business_id IS NOT NULL;

-- The history and the tasks of a run name it without a foreign key: the
-- store writes them only with the run locked (or created in the same
-- statement), and PruneRuns deletes them with it. A foreign key would cost
-- a lookup and a lock of the run per row written.
CREATE TABLE events (
    run_id  text COLLATE "C" NOT NULL,
    seq     bigint NOT NULL,
    kind    text NOT NULL,
    step    text NOT NULL DEFAULT '',
    idx     bigint NOT NULL DEFAULT 0,
    attempt bigint NOT NULL DEFAULT 0,
    name    text NOT NULL DEFAULT '',
    data    jsonb,
    error   text NOT NULL DEFAULT '',
    at      timestamptz NOT NULL,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE tasks (
    -- An identity never hands out an id twice, so a lease (id, token)
    -- never names a later task.
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id      text COLLATE "C" NOT NULL,
    queue       text COLLATE "C" NOT NULL,
    kind        text NOT NULL,
    workflow    text NOT NULL,
    version     bigint NOT NULL,
    step        text NOT NULL DEFAULT '',
    idx         bigint NOT NULL DEFAULT -1,
    attempt     bigint NOT NULL DEFAULT 0,
    payload     jsonb,
    item        jsonb,
    priority    bigint NOT NULL DEFAULT 0,
    ready_at    timestamptz NOT NULL,
    owner       text,
    -- Incremented by every claim: a task's tokens never repeat.
    token       bigint NOT NULL DEFAULT 0,
    lease_until timestamptz,
    claims      bigint NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL
) WITH (fillfactor = 50);

-- No indexed column changes when a task is claimed, heartbeats or is
-- released, so those updates are HOT: they rewrite the row in its page and
-- touch no index, provided the page has room. A claim leases many tasks
-- that were enqueued together, so the fillfactor leaves room for a new
-- version of every row of a page. (Claims that are not HOT would also add
-- index entries among the dead ones at the head of the queue, keeping
-- later claims from marking those dead: each claim would visit them all.)
-- ClaimTasks walks a queue in claim order and stops after its limit.
CREATE INDEX tasks_claim ON tasks (queue, priority DESC, ready_at, id);
-- NextReady: the earliest ready time of unleased tasks, and the earliest
-- expiry of leased ones among those ready before it (a lease ends after
-- its task's ready time, so no other can be earlier).
CREATE INDEX tasks_ready ON tasks (queue, ready_at);
-- Cancel, and PruneRuns.
CREATE INDEX tasks_run ON tasks (run_id, kind, step);
