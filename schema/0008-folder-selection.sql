-- 0008-folder-selection: selective sync (`syncpeer select`). The subtrees of a folder this
-- node holds; a folder without rows holds everything. What lies outside is neither fetched
-- nor deleted here, and this node never tells a peer it was deleted (its records there
-- are dropped, not turned into tombstones). Paths are validated as a peer's are (SafePath)
-- and none lies below another.
CREATE TABLE folder_selection (
    folder_id TEXT NOT NULL REFERENCES folders (folder_id) ON DELETE CASCADE, -- the shared folder
    path      TEXT NOT NULL CHECK (path <> ''),                               -- a selected subtree, relative to the root, '/'-separated
    PRIMARY KEY (folder_id, path)
) STRICT, WITHOUT ROWID;
