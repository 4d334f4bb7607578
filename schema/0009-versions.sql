-- 0009-versions: the versions store (issue 41). A version is a file's content that this node
-- replaced or saw replaced: by a peer's edit, deletion or rename over it, by a local edit or
-- deletion the scanner found, by conflict resolution or `verify`. Its chunks live in the
-- content-addressed store under HOME/versions/chunks (one file per chunk hash, shared by every
-- version that holds it); its metadata lives here. A version whose chunks we do not hold
-- (the scanner found the file already overwritten) is still listed, `held` = 0: a peer that
-- holds it can serve it.

CREATE TABLE versions (
    version_id  INTEGER NOT NULL PRIMARY KEY,                         -- row ID, what `restore --version` takes
    folder_id   TEXT    NOT NULL                                      -- the shared folder
                REFERENCES folders (folder_id) ON DELETE CASCADE,
    path        TEXT    NOT NULL CHECK (path <> ''),                  -- path relative to the folder root, '/'-separated
    version     TEXT    NOT NULL DEFAULT '{}'                         -- version vector of the content as a JSON object
                CHECK (json_valid(version) AND json_type(version) = 'object'),
    size        INTEGER NOT NULL CHECK (size >= 0),                   -- size in bytes
    mtime_ns    INTEGER NOT NULL,                                     -- modification time of the content, unix nanoseconds
    mode        INTEGER NOT NULL CHECK (mode >= 0),                   -- POSIX permission bits
    modified_by TEXT    NOT NULL,                                     -- device ID that wrote this content
    kept_at     INTEGER NOT NULL,                                     -- when it was replaced and kept (unix ms)
    reason      TEXT    NOT NULL,                                     -- what replaced it: 'peer-edit', 'peer-delete', 'local-edit', 'local-delete', 'conflict', 'verify', 'restore'
    root_hash   BLOB    NOT NULL CHECK (length(root_hash) = 32),      -- root hash of the content manifest
    held        INTEGER NOT NULL                                      -- 1: every chunk is in the store; 0: known, not held here
                CHECK (held IN (0, 1))
) STRICT;

-- A path's history, newest first; a folder's versions for expiry.
CREATE INDEX versions_by_path ON versions (folder_id, path, kept_at);

-- The chunk list of each version.
CREATE TABLE version_chunks (
    version_id  INTEGER NOT NULL                                      -- the version
                REFERENCES versions (version_id) ON DELETE CASCADE,
    chunk_index INTEGER NOT NULL CHECK (chunk_index >= 0),            -- position in the manifest, from 0
    offset      INTEGER NOT NULL CHECK (offset >= 0),                 -- byte offset of the chunk in the file
    size        INTEGER NOT NULL CHECK (size > 0),                    -- chunk length in bytes
    hash        BLOB    NOT NULL CHECK (length(hash) = 32),           -- BLAKE3 of the chunk's bytes: its name in the store
    PRIMARY KEY (version_id, chunk_index)
) STRICT, WITHOUT ROWID;

-- "Does any version still use this chunk?" (expiry frees a chunk file only when none does).
CREATE INDEX version_chunks_by_hash ON version_chunks (hash);
