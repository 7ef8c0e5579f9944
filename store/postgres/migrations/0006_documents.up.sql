-- Flow documents (store.Document): opaque content with a format tag,
-- under a name and a version, and the SHA-256 of the content (hex). A
-- name holds a content once (UNIQUE (name, hash)); versions of a name are
-- unique (the primary key): of two puts of new content to one name at
-- once, one waits for the other and takes the next version. Documents are
-- never deleted: runs name them.
CREATE TABLE documents (
    name       text COLLATE "C" NOT NULL,
    version    bigint NOT NULL,
    hash       text COLLATE "C" NOT NULL,
    format     text NOT NULL,
    content    bytea NOT NULL,
    size       bigint NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (name, version),
    UNIQUE (name, hash)
);

CREATE INDEX documents_hash ON documents (hash, created_at, name);
