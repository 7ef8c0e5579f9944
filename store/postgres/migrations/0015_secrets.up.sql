-- Named secrets (store.Secrets), by name: the value sealed by the caller
-- (AES-256-GCM in the library) with the key key_id and the nonce; the
-- store never sees a value. Retention (PruneRuns) does not touch it.
CREATE TABLE secrets (
    name       text COLLATE "C" PRIMARY KEY,
    key_id     text NOT NULL,
    nonce      bytea NOT NULL,
    ciphertext bytea NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
