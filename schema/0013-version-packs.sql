-- 0013-version-packs: versions kept without copying them. When a peer's edit replaces a large
-- file, the replaced inode itself (swapped out of the folder, on the same file system as the
-- node's home, with no other link) is linked into HOME/versions/.packs/NAME as a pack, and the
-- versions store reads its chunks from there (each verified when read), instead of writing
-- every chunk again under versions/.chunks. A pack goes when no kept version uses any chunk
-- in it; a pack file that no row names is removed at start.

CREATE TABLE version_packs (
    pack_id  INTEGER NOT NULL PRIMARY KEY,                            -- row ID
    name     TEXT    NOT NULL UNIQUE                                  -- file name under versions/.packs
             CHECK (length(name) BETWEEN 1 AND 64 AND name NOT GLOB '*[^0-9a-f-]*'),
    size     INTEGER NOT NULL CHECK (size >= 0),                      -- the pack file's size in bytes
    added_at INTEGER NOT NULL                                         -- when it was adopted (unix ms)
) STRICT;

-- Where a pack holds a chunk: hash → pack, offset, size. A chunk may be in several packs (and
-- in versions/.chunks too); a location found damaged when read is removed.
CREATE TABLE version_pack_chunks (
    hash    BLOB    NOT NULL CHECK (length(hash) = 32),               -- BLAKE3 of the chunk's bytes
    pack_id INTEGER NOT NULL                                          -- the pack holding it
            REFERENCES version_packs (pack_id) ON DELETE CASCADE,
    offset  INTEGER NOT NULL CHECK (offset >= 0),                     -- byte offset of the chunk in the pack
    size    INTEGER NOT NULL CHECK (size > 0),                        -- chunk length in bytes
    PRIMARY KEY (hash, pack_id)
) STRICT, WITHOUT ROWID;

-- A pack's chunks (expiry asks whether any kept version still uses one of them).
CREATE INDEX version_pack_chunks_by_pack ON version_pack_chunks (pack_id);
