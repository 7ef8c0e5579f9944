-- Flow documents (store.Document): opaque content with a format tag,
-- under a name and a version, and the SHA-256 of the content (hex). A
-- name holds a content once (UNIQUE (name, hash)); versions of a name are
-- unique (the primary key). Documents are never deleted: runs name them.
-- Times are Unix microseconds UTC.
CREATE TABLE documents (
    name       TEXT NOT NULL,
    version    INTEGER NOT NULL,
    hash       TEXT NOT NULL,
    format     TEXT NOT NULL,
    content    BLOB NOT NULL,
    size       INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (name, version),
    UNIQUE (name, hash)
) STRICT, WITHOUT ROWID;

CREATE INDEX documents_hash ON documents (hash, created_at, name);
