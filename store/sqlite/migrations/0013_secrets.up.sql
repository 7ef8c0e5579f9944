-- Named secrets (store.Secrets), by name: the value sealed by the caller
-- (AES-256-GCM in the library) with the key key_id and the nonce; the
-- store never sees a value. Times are Unix microseconds UTC. Retention
-- (PruneRuns) does not touch it.
CREATE TABLE secrets (
    name       TEXT PRIMARY KEY,
    key_id     TEXT NOT NULL,
    nonce      BLOB NOT NULL,
    ciphertext BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
