-- 0001-initial: the first schema of the syncpeer node index.
--
-- Shipped: never edit this file; add 0002-….sql instead (see schema/README.md).
-- Conventions: STRICT tables; timestamps are INTEGER unix milliseconds (UTC); booleans
-- are INTEGER 0/1 with a CHECK; hashes are 32-byte BLAKE2b-256 BLOBs; device IDs are the
-- canonical 56-character base32 form (A–Z, 2–7), without the dashes shown to users.

-- Migrations applied to this database, one row per schema/NNNN-name.sql file.
CREATE TABLE schema_migrations (
    version    INTEGER NOT NULL PRIMARY KEY CHECK (version > 0), -- NNNN of the file name
    name       TEXT    NOT NULL,                                 -- file name without ".sql", e.g. '0001-initial'
    applied_at INTEGER NOT NULL                                  -- when it was applied (unix ms)
) STRICT;

-- Node settings as key/value text (display name, listen port, …).
CREATE TABLE settings (
    key   TEXT NOT NULL PRIMARY KEY, -- setting name, e.g. 'display_name'
    value TEXT NOT NULL              -- setting value, as text (the reader parses it)
) STRICT;

-- Devices we know: paired, invited, declined or blocked. The pinned key is the identity.
CREATE TABLE peers (
    device_id   TEXT    NOT NULL PRIMARY KEY                    -- canonical device ID: base32 of BLAKE2b-256(public_key) plus check characters
                CHECK (length(device_id) = 56 AND device_id NOT GLOB '*[^A-Z2-7]*'),
    name        TEXT    NOT NULL DEFAULT ''                     -- display name last seen (not an identity), at most 63 bytes UTF-8
                CHECK (length(CAST(name AS BLOB)) <= 63),
    public_key  BLOB    NOT NULL                                -- pinned X25519 static public key (Noise 's'), 32 bytes
                CHECK (length(public_key) = 32),
    trust       TEXT    NOT NULL                                -- 'paired' (reconnects without prompt), 'pending' (invitation open),
                CHECK (trust IN ('paired', 'pending', 'declined', 'blocked')), -- 'declined' (said no once), 'blocked' (never accept)
    auto_accept INTEGER NOT NULL DEFAULT 0                      -- 1: accept this peer's resources without asking
                CHECK (auto_accept IN (0, 1)),
    first_seen  INTEGER NOT NULL,                               -- when we first heard of this device (unix ms)
    last_seen   INTEGER,                                        -- last authenticated contact (unix ms); NULL if never connected
    paired_at   INTEGER,                                        -- when the pairing was accepted (unix ms); NULL unless paired once
    addresses   TEXT    NOT NULL DEFAULT '[]'                   -- JSON array of "host:port" strings, last known first
                CHECK (json_valid(addresses) AND json_type(addresses) = 'array')
) STRICT;

-- Peers by display name (`syncpeer send FILE bob`).
CREATE INDEX peers_by_name ON peers (name);

-- Folders this node synchronizes.
CREATE TABLE folders (
    folder_id  TEXT    NOT NULL PRIMARY KEY, -- folder ID shared by every peer of the folder
    path       TEXT    NOT NULL UNIQUE,      -- absolute local path of the folder root
    label      TEXT    NOT NULL DEFAULT '',  -- human label shown in the CLI
    created_at INTEGER NOT NULL,             -- when the folder was added on this node (unix ms)
    paused     INTEGER NOT NULL DEFAULT 0    -- 1: scanning and syncing are paused
               CHECK (paused IN (0, 1))
) STRICT;

-- Which peers share which folder, and how far index exchange has come with each.
CREATE TABLE folder_peers (
    folder_id         TEXT    NOT NULL                                -- the shared folder
                      REFERENCES folders (folder_id) ON DELETE CASCADE,
    device_id         TEXT    NOT NULL                                -- the peer sharing it
                      REFERENCES peers (device_id) ON DELETE CASCADE,
    acked_sequence    INTEGER NOT NULL DEFAULT 0                      -- highest of our files.sequence this peer acknowledged
                      CHECK (acked_sequence >= 0),
    received_sequence INTEGER NOT NULL DEFAULT 0                      -- highest of the peer's sequence numbers we received
                      CHECK (received_sequence >= 0),
    PRIMARY KEY (folder_id, device_id)
) STRICT;

-- Cascades from peers look rows up by device.
CREATE INDEX folder_peers_by_device ON folder_peers (device_id);

-- The local index: one row per path in a folder, including tombstones of deleted files.
CREATE TABLE files (
    file_id        INTEGER NOT NULL PRIMARY KEY,                      -- row ID, referenced by file_chunks
    folder_id      TEXT    NOT NULL                                   -- folder the path belongs to
                   REFERENCES folders (folder_id) ON DELETE CASCADE,
    path           TEXT    NOT NULL,                                  -- path relative to the folder root, '/'-separated
    sequence       INTEGER NOT NULL CHECK (sequence > 0),             -- local sequence number, raised on every change in the folder
    kind           TEXT    NOT NULL                                   -- what the path is
                   CHECK (kind IN ('file', 'directory', 'symlink')),
    size           INTEGER NOT NULL CHECK (size >= 0),                -- size in bytes (0 for directories, symlinks, deletions)
    mtime_ns       INTEGER NOT NULL,                                  -- modification time, unix nanoseconds
    mode           INTEGER NOT NULL CHECK (mode >= 0),                -- POSIX permission bits (st_mode & 07777)
    inode          INTEGER,                                           -- local inode at the last scan; NULL when not on disk
    deleted        INTEGER NOT NULL DEFAULT 0                         -- 1: tombstone, the file was deleted
                   CHECK (deleted IN (0, 1)),
    symlink_target TEXT,                                              -- target of a symlink; NULL for other kinds
    version        TEXT    NOT NULL DEFAULT '{}'                      -- version vector as a JSON object {device ID: counter}
                   CHECK (json_valid(version) AND json_type(version) = 'object'),
    root_hash      BLOB                                               -- root hash of the content manifest; NULL without content
                   CHECK (root_hash IS NULL OR length(root_hash) = 32),
    modified_by    TEXT    NOT NULL,                                  -- device ID that made the last change (may be us)
    UNIQUE (folder_id, path)
) STRICT;

-- "Everything changed since sequence N" for index updates to peers.
CREATE UNIQUE INDEX files_by_sequence ON files (folder_id, sequence);

-- The chunk list of each file in the local index.
CREATE TABLE file_chunks (
    file_id     INTEGER NOT NULL                                      -- the file
                REFERENCES files (file_id) ON DELETE CASCADE,
    chunk_index INTEGER NOT NULL CHECK (chunk_index >= 0),            -- position in the file's manifest, from 0
    offset      INTEGER NOT NULL CHECK (offset >= 0),                 -- byte offset of the chunk in the file
    size        INTEGER NOT NULL CHECK (size > 0),                    -- chunk length in bytes
    hash        BLOB    NOT NULL CHECK (length(hash) = 32),           -- BLAKE2b-256 of the chunk's bytes
    PRIMARY KEY (file_id, chunk_index)
) STRICT, WITHOUT ROWID;

-- Find a chunk with a given hash in any local file, so renames and copies move no data.
CREATE INDEX file_chunks_by_hash ON file_chunks (hash);

-- Resource transfers (files sent to or received from a peer), kept for resume.
CREATE TABLE transfers (
    transfer_id  TEXT    NOT NULL PRIMARY KEY,                        -- transfer ID chosen by the sender
    direction    TEXT    NOT NULL                                     -- whether we send or receive
                 CHECK (direction IN ('send', 'receive')),
    device_id    TEXT    NOT NULL                                     -- the other end; forgetting a peer drops its transfers
                 REFERENCES peers (device_id) ON DELETE CASCADE,
    name         TEXT    NOT NULL,                                    -- file name as offered (validated before it gets here)
    size         INTEGER NOT NULL CHECK (size >= 0),                  -- file size in bytes
    mode         INTEGER NOT NULL CHECK (mode >= 0),                  -- POSIX permission bits offered
    mtime_ns     INTEGER NOT NULL,                                    -- modification time offered, unix nanoseconds
    root_hash    BLOB    NOT NULL CHECK (length(root_hash) = 32),     -- root hash of the manifest: names the content
    chunk_count  INTEGER NOT NULL CHECK (chunk_count >= 0),           -- number of chunks in the manifest
    state        TEXT    NOT NULL                                     -- lifecycle state
                 CHECK (state IN ('offered', 'active', 'paused', 'completed', 'failed', 'cancelled')),
    partial_path TEXT,                                                -- receive: the partial file chunks are written to
    final_path   TEXT,                                                -- receive: destination after the rename; send: source file
    bytes_done   INTEGER NOT NULL DEFAULT 0                           -- bytes in verified chunks
                 CHECK (bytes_done >= 0 AND bytes_done <= size),
    error        TEXT,                                                -- last error, one line, when state is 'failed'
    created_at   INTEGER NOT NULL,                                    -- when the offer was made or received (unix ms)
    updated_at   INTEGER NOT NULL                                     -- last change of this row (unix ms)
) STRICT;

-- Resume: find an unfinished transfer of the same content with the same peer.
CREATE INDEX transfers_by_peer_content ON transfers (device_id, root_hash);

-- The manifest of each transfer and which chunks are verified on the receiving side.
CREATE TABLE transfer_chunks (
    transfer_id TEXT    NOT NULL                                      -- the transfer
                REFERENCES transfers (transfer_id) ON DELETE CASCADE,
    chunk_index INTEGER NOT NULL CHECK (chunk_index >= 0),            -- position in the manifest, from 0
    offset      INTEGER NOT NULL CHECK (offset >= 0),                 -- byte offset of the chunk in the file
    size        INTEGER NOT NULL CHECK (size > 0),                    -- chunk length in bytes
    hash        BLOB    NOT NULL CHECK (length(hash) = 32),           -- BLAKE2b-256 of the chunk's bytes
    verified    INTEGER NOT NULL DEFAULT 0                            -- 1: received, hash checked, written to the partial file
                CHECK (verified IN (0, 1)),
    PRIMARY KEY (transfer_id, chunk_index)
) STRICT, WITHOUT ROWID;
