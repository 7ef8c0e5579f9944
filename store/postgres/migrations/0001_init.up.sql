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
) WITH (fillfactor = 85); -- room for HOT updates of the run row

-- Partial indexes leave out the (many) runs without a value.
CREATE UNIQUE INDEX runs_unique_key ON runs (unique_key) WHERE unique_key IS NOT NULL;
-- ListRuns walks these newest first; FindRun uses runs_business.
CREATE INDEX runs_created ON runs (created_at, id);
CREATE INDEX runs_workflow ON runs (workflow, created_at, id);
CREATE INDEX runs_business ON runs (business_id, created_at, id) WHERE business_id IS NOT NULL;
-- PruneRuns.
CREATE INDEX runs_finished ON runs (finished_at) WHERE finished_at IS NOT NULL;

CREATE TABLE events (
    run_id  text COLLATE "C" NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
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
    run_id      text COLLATE "C" NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
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
) WITH (fillfactor = 85);

-- No indexed column changes when a task is claimed, heartbeats or is
-- released, so those updates are HOT: they rewrite the row in its page and
-- touch no index (hence also the fillfactor).
-- ClaimTasks walks a queue in claim order and stops after its limit.
CREATE INDEX tasks_claim ON tasks (queue, priority DESC, ready_at, id);
-- NextReady: the earliest ready time of unleased tasks, and the earliest
-- expiry of leased ones among those ready before it (a lease ends after
-- its task's ready time, so no other can be earlier).
CREATE INDEX tasks_ready ON tasks (queue, ready_at);
-- Cancel, and the cascade from runs.
CREATE INDEX tasks_run ON tasks (run_id, kind, step);
