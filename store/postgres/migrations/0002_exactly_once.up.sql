-- What exactly-once execution needs of the store: handlers and heartbeat
-- details on tasks, idempotency keys on history entries, a condition on
-- runs, and the worker registry. Adding a column with a constant default
-- (or none) rewrites no table.

-- What a worker must have to run the task ('' when any worker can), and
-- the heartbeat details last recorded for it. Neither is indexed: a claim
-- that lists handlers still walks tasks_claim in claim order and skips the
-- rows it cannot take, and a heartbeat that records details stays HOT.
ALTER TABLE tasks ADD COLUMN handler text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN details jsonb;

-- The idempotency key of the change that appended the entry, on its first
-- entry only; NULL otherwise.
ALTER TABLE events ADD COLUMN key text COLLATE "C";
-- Apply looks the keys of its keyed changes up here (with their runs
-- locked), and a key cannot be recorded twice in a run. Partial: the
-- (many) entries without a key cost nothing. History entries are never
-- updated, so the index costs no HOT update.
CREATE UNIQUE INDEX events_key ON events (run_id, key) WHERE key IS NOT NULL;

-- Why an active run does not progress: the store.Condition as JSON, NULL
-- when there is none. Not indexed: updates of runs stay HOT.
ALTER TABLE runs ADD COLUMN condition jsonb;

-- Live worker processes, by id. A record counts until expires_at; expired
-- records are deleted when the live ones are listed.
CREATE TABLE workers (
    id         text COLLATE "C" PRIMARY KEY,
    queues     text[] NOT NULL DEFAULT '{}',
    handlers   text[] NOT NULL DEFAULT '{}',
    host       text NOT NULL DEFAULT '',
    pid        bigint NOT NULL DEFAULT 0,
    started_at timestamptz NOT NULL,
    seen_at    timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
