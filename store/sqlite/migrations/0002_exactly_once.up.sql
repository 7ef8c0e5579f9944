-- What exactly-once execution needs of the store: handlers and heartbeat
-- details on tasks, idempotency keys on history entries, a condition on
-- runs, and the worker registry. Times are Unix microseconds UTC; JSON
-- values are TEXT, NULL when absent.

-- What a worker must have to run the task ('' when any worker can), and
-- the heartbeat details last recorded for it. Neither is indexed: a claim
-- that lists handlers still walks tasks_claim in claim order and skips the
-- rows it cannot take; a heartbeat that records details still touches the
-- table alone; and StrandedTasks, once a minute, walks a queue's entries
-- of tasks_claim (ready_at is in it) and sorts what it keeps. An index of
-- their own would cost every task insert and delete a b-tree write.
ALTER TABLE tasks ADD COLUMN handler TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN details TEXT;

-- The idempotency key of the change that appended the entry, on its first
-- entry only; NULL otherwise.
ALTER TABLE events ADD COLUMN key TEXT;
-- A keyed change looks its key up here before it writes, and a key cannot
-- be recorded twice in a run. Partial: the (many) entries without a key
-- cost nothing.
CREATE UNIQUE INDEX events_key ON events (run_id, key) WHERE key IS NOT NULL;

-- Why an active run does not progress: the store.Condition as JSON, NULL
-- when there is none.
ALTER TABLE runs ADD COLUMN condition TEXT;

-- Live worker processes, by id. A record counts until expires_at; expired
-- records are deleted when a worker registers.
CREATE TABLE workers (
    id         TEXT PRIMARY KEY,
    queues     TEXT NOT NULL DEFAULT '[]', -- JSON array of strings
    handlers   TEXT NOT NULL DEFAULT '[]', -- JSON array of strings
    host       TEXT NOT NULL DEFAULT '',
    pid        INTEGER NOT NULL DEFAULT 0,
    started_at INTEGER NOT NULL,
    seen_at    INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
