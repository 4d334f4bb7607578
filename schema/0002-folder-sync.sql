-- 0002-folder-sync: what folder sync needs on top of 0001's folders, folder_peers, files
-- and file_chunks: a local sequence counter that never goes back, index identities (so a
-- peer whose index was reset is noticed), a sticky folder error, the peers' indexes
-- (remote_files), pending folder offers, and an index to find local content by root hash.
--
-- Decisions (see also NodeIndex+Folders.swift):
-- * The runtime state of a folder (scanning, syncing, idle) is not stored: it is derived
--   by the running node. Only an error that stops a folder is stored (folders.error), so
--   it is still shown after a restart until a scan or the user clears it.
-- * Local sequence numbers come from folders.max_sequence, not from max(files.sequence):
--   removing the file with the highest sequence must not let the number be given again,
--   or a peer that acknowledged it would miss the next change.
-- * A peer's index is kept per (folder, peer) and cascades from folder_peers: unsharing a
--   folder with a peer, removing the folder or forgetting the peer drops what it told us.
-- * The manifest of a remote file is kept as the encoded bytes the peer sent (PeerFiles'
--   Manifest encoding); the index does not interpret it.

-- Highest local sequence ever given in the folder (files.sequence never exceeds it and no
-- number is given twice). Existing folders start at the highest sequence they have.
ALTER TABLE folders ADD COLUMN max_sequence INTEGER NOT NULL DEFAULT 0 CHECK (max_sequence >= 0); -- highest local sequence assigned in this folder, ever
UPDATE folders SET max_sequence = (SELECT coalesce(max(sequence), 0) FROM files WHERE files.folder_id = folders.folder_id);

-- Identity of this node's index of the folder, sent with index updates: a peer that sees
-- another value than last time knows our sequences started over and asks for everything.
-- Nonzero; chosen at random when the folder is added (and here for existing folders).
ALTER TABLE folders ADD COLUMN index_id INTEGER NOT NULL DEFAULT 0; -- random nonzero ID of our index of this folder (0 only before this migration filled it)
UPDATE folders SET index_id = (random() & 9223372036854775807) | 1;

-- Why the folder stopped syncing (root missing, not readable, …); NULL when it is fine.
ALTER TABLE folders ADD COLUMN error TEXT; -- last error that stopped syncing, one line; NULL when none
ALTER TABLE folders ADD COLUMN error_at INTEGER; -- when error was recorded (unix ms); NULL when error is NULL

-- The index ID of the peer's index that received_sequence counts in. When a peer announces
-- another ID, its remote_files are dropped and received_sequence starts again from 0.
ALTER TABLE folder_peers ADD COLUMN remote_index_id INTEGER NOT NULL DEFAULT 0; -- the peer's index ID for this folder; 0 before the first exchange

-- Whole-file reuse: "is there a local file with this content?" (renames and copies move
-- no data), in one folder or any. Tombstones and directories have no root hash.
CREATE INDEX files_by_root_hash ON files (root_hash, folder_id) WHERE root_hash IS NOT NULL;

-- The last known index of each peer for each shared folder: one row per path it reported,
-- tombstones included. Rows are replaced as index updates arrive.
CREATE TABLE remote_files (
    folder_id      TEXT    NOT NULL,                                  -- the shared folder
    device_id      TEXT    NOT NULL,                                  -- the peer whose index this row is part of
    path           TEXT    NOT NULL                                   -- path relative to the folder root, '/'-separated
                   CHECK (path <> ''),
    sequence       INTEGER NOT NULL CHECK (sequence > 0),             -- the peer's local sequence number of this entry
    kind           TEXT    NOT NULL                                   -- what the path is on the peer
                   CHECK (kind IN ('file', 'directory', 'symlink')),
    size           INTEGER NOT NULL CHECK (size >= 0),                -- size in bytes (0 for directories, symlinks, deletions)
    mtime_ns       INTEGER NOT NULL,                                  -- modification time on the peer, unix nanoseconds
    mode           INTEGER NOT NULL CHECK (mode >= 0),                -- POSIX permission bits (st_mode & 07777)
    deleted        INTEGER NOT NULL DEFAULT 0                         -- 1: tombstone, the peer deleted the path
                   CHECK (deleted IN (0, 1)),
    symlink_target TEXT,                                              -- target of a symlink; NULL for other kinds
    version        TEXT    NOT NULL DEFAULT '{}'                      -- version vector as a JSON object {device ID: counter}
                   CHECK (json_valid(version) AND json_type(version) = 'object'),
    root_hash      BLOB                                               -- root hash of the content manifest; NULL without content
                   CHECK (root_hash IS NULL OR length(root_hash) = 32),
    modified_by    TEXT    NOT NULL,                                  -- device ID that made the last change
    manifest       BLOB                                               -- encoded chunk list (PeerFiles Manifest); NULL for non-files and tombstones
                   CHECK (manifest IS NULL OR (kind = 'file' AND deleted = 0)),
    PRIMARY KEY (folder_id, device_id, path),
    FOREIGN KEY (folder_id, device_id) REFERENCES folder_peers (folder_id, device_id) ON DELETE CASCADE
) STRICT; -- a rowid table: manifests make rows large, which WITHOUT ROWID handles badly

-- "What did this peer change after its sequence N" (planning only what changed).
CREATE INDEX remote_files_by_sequence ON remote_files (folder_id, device_id, sequence);

-- Every peer's state of one path (the planner looks at all of them together).
CREATE INDEX remote_files_by_path ON remote_files (folder_id, path);

-- Folder shares offered to us and not answered yet (`syncpeer accept ID`). Kept across
-- restarts so pending offers are listed while the offering peer is offline.
CREATE TABLE folder_offers (
    folder_id  TEXT    NOT NULL                                       -- folder ID the peer offers
               CHECK (folder_id <> ''),
    device_id  TEXT    NOT NULL                                       -- the peer offering it; forgetting the peer drops its offers
               REFERENCES peers (device_id) ON DELETE CASCADE,
    label      TEXT    NOT NULL DEFAULT '',                           -- the folder's label on the offering peer
    offered_at INTEGER NOT NULL,                                      -- when the offer was last received (unix ms)
    PRIMARY KEY (folder_id, device_id)
) STRICT;

-- Cascades from peers look offers up by device.
CREATE INDEX folder_offers_by_device ON folder_offers (device_id);
