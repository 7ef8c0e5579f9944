-- The history as one row per change instead of one row per entry. The
-- entries a change appends to a run (a step's completion is "step
-- started", "step completed" and the successors' "step scheduled"; a
-- start is "run started" and its first steps' "step scheduled") are
-- written together, read together and deleted together, so they need not
-- each pay for a heap tuple (24 bytes of header), a run id and a key in
-- the primary key, and a WAL record for the row and one for the index.
--
-- A row holds the entries seq .. seq+n-1 of its run, all appended at
-- "at", in "entries": a JSON array of [kind, step, index, attempt, name,
-- error] arrays with the entry's data as a seventh element when it has
-- any. It is text, not jsonb: the store writes and reads it whole and
-- never looks inside it in SQL, so nothing is parsed on the way in.
-- Fixed-width columns first: no padding between them.
CREATE TABLE history (
    seq     bigint NOT NULL,
    at      timestamptz NOT NULL,
    n       integer NOT NULL CHECK (n > 0),
    run_id  text COLLATE "C" NOT NULL,
    -- The idempotency key of the change (store.Change.Key), or NULL.
    key     text COLLATE "C",
    entries text NOT NULL,
    PRIMARY KEY (run_id, seq)
);

INSERT INTO history (seq, at, n, run_id, key, entries)
SELECT seq, at, 1, run_id, key, json_build_array(CASE WHEN data IS NULL
        THEN json_build_array(kind, step, idx, attempt, name, error)
        ELSE json_build_array(kind, step, idx, attempt, name, error, data) END)::text
FROM events;

DROP TABLE events;

-- A key cannot be recorded twice in a run (Apply reports the violation as
-- store.ErrDuplicateChange); Apply looks keys up here with the runs
-- locked.
CREATE UNIQUE INDEX history_key ON history (run_id, key) WHERE key IS NOT NULL;
